#pragma once
// What keeps a run's outputs whole: the output folder check (no mixing with another run's
// results), and the stop requests from SIGINT / SIGTERM, honoured at safe points.

#include <ksweep/comm/communicator.hpp>

#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace ksweep::app {

namespace fs = std::filesystem;

// --- Signals -------------------------------------------------------------------------------

/// Installs the SIGINT and SIGTERM handlers (they only record the signal; a second signal of
/// the same kind ends the process at once) and ignores SIGXFSZ, so that a file-size limit
/// makes writes fail with EFBIG, reported like a full disk, instead of killing the process.
void install_signal_handlers();

/// The signal received so far (SIGINT or SIGTERM), 0 when none.
int stop_signal();

/// Thrown at a safe point after SIGINT or SIGTERM; main turns it into exit code 128 + signal.
class Interrupted : public std::exception {
 public:
  Interrupted(int signal, std::string message) : m_signal(signal), m_message(std::move(message)) {}
  int signal() const { return m_signal; }
  char const* what() const noexcept override { return m_message.c_str(); }

 private:
  int m_signal;
  std::string m_message;
};

/// An error found by every rank at the same point (the same values on all ranks): main
/// reports it once and every rank exits normally with code 1, unwinding (so scratch folders
/// are removed) instead of being killed by MPI_Abort.
class CollectiveError : public std::exception {
 public:
  explicit CollectiveError(std::string message) : m_message(std::move(message)) {}
  char const* what() const noexcept override { return m_message.c_str(); }

 private:
  std::string m_message;
};

/// "SIGINT" or "SIGTERM".
std::string signal_name(int signal);

/// Collective: the signal any rank received (0 when none), the same on every rank.
int agree_stop(comm::Communicator const& comm, bool locally_stopped = false);

// --- Output folder -------------------------------------------------------------------------

/// The files and folders ksweep writes into an output folder.
std::vector<std::string> const& result_names();

/// Result files of a run present in `dir` (names relative to it), temporary files included.
std::vector<std::string> results_in(fs::path const& dir);

/// Throws ksweep::Error when `path` exists and is not a folder, or holds another run's results
/// (unless `overwrite`, or it is the folder being resumed). Creates nothing.
void check_output_folder(fs::path const& path, bool overwrite, bool resume_in_place);

/// The output folder of a run. The constructor runs every check (it holds no other run's
/// results unless `overwrite`, or it is the folder being resumed; it can be created and
/// written) and creates the folder; nothing is written into it until claim(). A folder it
/// created is removed again if the run ends before claim() with the folder still empty.
class OutputFolder {
 public:
  OutputFolder(fs::path path, bool overwrite, bool resume_in_place, bool root);
  ~OutputFolder();
  OutputFolder(OutputFolder const&) = delete;
  OutputFolder& operator=(OutputFolder const&) = delete;
  /// Before the first write: with `overwrite`, removes the previous run's results.
  void claim();
  fs::path const& path() const { return m_path; }

 private:
  fs::path m_path;
  bool m_overwrite, m_root, m_created = false, m_claimed = false;
};

/// The command that resumes this run: the program's arguments with `--resume OUT` (replacing
/// any --resume, --overwrite and --dry-run there), behind `mpirun -n RANKS` for several ranks.
std::string resume_command(std::vector<std::string> const& argv, fs::path const& out, int ranks = 1);

}  // namespace ksweep::app
