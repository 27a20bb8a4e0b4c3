#pragma once
// What keeps a run's outputs whole: the output folder check (no mixing with another run's
// results), and the stop requests from SIGINT / SIGTERM, honoured at safe points.

#include <ksweep/base/error.hpp>
#include <ksweep/comm/collective.hpp>
#include <ksweep/comm/communicator.hpp>

#include <exception>
#include <filesystem>
#include <optional>
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

/// Throws Interrupted when SIGINT or SIGTERM has been received, saying the run stopped while
/// `doing` and wrote nothing: the check of long phases before the first write.
void throw_if_stopped(char const* doing);

/// "SIGINT" or "SIGTERM".
std::string signal_name(int signal);

/// Collective: the signal any rank received (0 when none), the same on every rank.
int agree_stop(comm::Communicator const& comm, bool locally_stopped = false);

// --- Ranks that must agree (ksweep/comm/collective.hpp) -------------------------------------

using comm::agree_on;
using comm::CollectiveError;
using comm::collectively;
using comm::on_every_rank;
using comm::settle;

// --- Output folder -------------------------------------------------------------------------

/// The files and folders ksweep writes into an output folder.
std::vector<std::string> const& result_names();

/// Result files of a run present in `dir` (names relative to it), temporary files included;
/// folders that hold no file (an `epochs/` left empty by a failed run) and the folders of
/// results kept aside by --overwrite are not results.
std::vector<std::string> results_in(fs::path const& dir);

/// An input of the run (a file it reads), named by the key that gives it.
struct RunInput {
  std::string key;  ///< e.g. "model.source", "fwi.observed", "--config"
  fs::path path;
};

/// Every check of the output folder that writes nothing, in the order of their cost: `path`
/// is a folder or can be created (its first existing parent is a writable folder); no other
/// ksweep run holds it (its lock); it holds no other run's results (unless `overwrite`, or it
/// is the folder being resumed); with `overwrite`, none of `inputs` is one of the results
/// that would be replaced. Throws ksweep::Error. Creates nothing.
void check_output_folder(fs::path const& path, bool overwrite, bool resume_in_place,
                         std::vector<RunInput> const& inputs = {});

/// The output folder of a run, held for the run's lifetime. The constructor creates the folder
/// when needed, takes its lock (an exclusive flock on the folder, so that a second run into it
/// is refused while this one lives) and then runs every check of check_output_folder; nothing
/// is written into it until claim(). claim() moves the results of an earlier run aside (with
/// `overwrite`) into a hidden folder; finish() removes that folder once the run has written
/// all its results. A run that ends without finish() leaves the earlier results in place
/// (moved back when the run wrote none of its own, else kept in the hidden folder, which is
/// named on stderr), removes the empty result folders it made, and removes the output folder
/// itself when it created it and it is still empty.
class OutputFolder {
 public:
  OutputFolder(fs::path path, bool overwrite, bool resume_in_place, bool root, std::vector<RunInput> inputs = {});
  ~OutputFolder();
  OutputFolder(OutputFolder const&) = delete;
  OutputFolder& operator=(OutputFolder const&) = delete;
  /// Before the first write: with `overwrite`, moves the previous run's results aside.
  void claim();
  /// After the last write: the results moved aside by claim() are removed.
  void finish();
  fs::path const& path() const { return m_path; }

 private:
  fs::path m_path, m_aside;
  bool m_overwrite, m_root, m_created = false, m_claimed = false, m_finished = false;
  int m_lock = -1;
};

/// The command that resumes this run: the program's arguments with `--resume OUT` (replacing
/// any --resume, --overwrite and --dry-run there), behind `mpirun -n RANKS` for several ranks.
std::string resume_command(std::vector<std::string> const& argv, fs::path const& out, int ranks = 1);

}  // namespace ksweep::app
