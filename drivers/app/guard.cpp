#include "guard.hpp"

#include <ksweep/base/error.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/atomic_file.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ksweep::app {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

std::string quote_arg(std::string const& s) {
  bool plain = !s.empty();
  for (char c : s) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,+@%", c));
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // a second signal ends the process at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
  // A closed pipe on stdout (`ksweep fwi ... | head -n 1`) makes writes to it fail with EPIPE
  // instead of killing the run: the results still go to the output folder.
  std::signal(SIGPIPE, SIG_IGN);
}

int stop_signal() { return static_cast<int>(g_signal); }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal);
  }
}

void throw_if_stopped(char const* doing) {
  if (int const sig = stop_signal())
    throw Interrupted(sig, "stopped by " + signal_name(sig) + " while " + doing + "; nothing was written");
}

int agree_stop(comm::Communicator const& comm, bool locally_stopped) {
  int const mine = stop_signal() != 0 ? stop_signal() : (locally_stopped ? SIGTERM : 0);
  if (comm.size() == 1) return mine;
  double v[2] = {static_cast<double>(mine), mine != 0 ? 1.0 : 0.0};
  comm.allreduce_sum(v, 2);
  if (v[1] == 0) return 0;
  return mine != 0 ? mine : static_cast<int>(v[0] / v[1] + 0.5);
}

std::vector<std::string> const& result_names() {
  static std::vector<std::string> const names{"summary.json",  "checkpoint.bin",   "observed.h5", "observed.segy",
                                              "synthetic.h5",  "synthetic.segy",   "wavelet.h5",  "model_final.h5",
                                              "true_model.h5", "initial_model.h5", "models",      "epochs",
                                              "figures",       "image.h5"};
  return names;
}

namespace {

/// Hidden folders where --overwrite keeps an earlier run's results until the new run is done.
constexpr char const* aside_prefix = ".ksweep-replaced-";

bool holds_a_file(fs::path const& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (!it->is_directory(ec)) return true;
  return false;
}

/// The lock of a run on its output folder: an exclusive flock on the folder itself (released
/// by the kernel when the process ends, however it ends). Where folders cannot be locked (NFS
/// emulates flock with byte-range locks, which need a file open for writing), the lock is
/// taken on the file `.ksweep.lock` in the folder instead. Returns the descriptor, or -1 with
/// errno when the folder is locked (EWOULDBLOCK) or cannot be opened.
constexpr char const* lock_file_name = ".ksweep.lock";

int lock_folder(fs::path const& dir) {
  auto take = [](int fd) {
    if (fd < 0) return -1;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    int const err = errno;
    ::close(fd);
    errno = err;
    return -1;
  };
  int fd = take(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd >= 0 || errno == EWOULDBLOCK) return fd;
  return take(::open((dir / lock_file_name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
}

void refuse_locked(fs::path const& path) {
  KSWEEP_REQUIRE(false, "the output folder " << io::shown_path(path)
                                             << " is in use by another ksweep run (it holds the folder's lock); wait "
                                                "for that run to end, or choose another folder");
}

/// `p` with symbolic links and dots resolved as far as it exists.
fs::path resolved(fs::path const& p) {
  std::error_code ec;
  auto r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p) : r;
}

}  // namespace

std::vector<std::string> results_in(fs::path const& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (auto const& e : fs::directory_iterator(dir, ec)) {
    std::string const name = e.path().filename().string();
    auto const& names = result_names();
    bool const tmp =
        (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) || name.find(".tmp.") != std::string::npos;
    if (!tmp && std::find(names.begin(), names.end(), name) == names.end()) continue;
    bool const folder = e.is_directory(ec);
    // An empty epochs/ is no result; a folder named like a result file (model_final.h5/) is one,
    // since the run could not write that file.
    bool const result_folder = name == "models" || name == "epochs" || name == "figures";
    if (folder && result_folder && !holds_a_file(e.path())) continue;
    found.push_back(name + (folder ? "/" : ""));
  }
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

void check_folder(fs::path const& path, bool overwrite, bool resume_in_place, std::vector<RunInput> const& inputs,
                  bool probe_lock) {
  std::error_code ec;
  auto const status = fs::status(path, ec);
  if (!fs::exists(status)) {
    // It will be created: tried now (the folders made are removed again at once), since only
    // creating tells (permissions, read-only or special file systems, quotas).
    // The folder itself is never made here (another run may be making it to hold it): its
    // missing parents are, and a uniquely named probe folder in place of it.
    fs::path const full = fs::absolute(path, ec);
    std::vector<fs::path> missing;  // the missing parents, the outermost first
    for (fs::path p = full.parent_path(); !p.empty() && !fs::exists(p, ec) && p != p.root_path(); p = p.parent_path())
      missing.insert(missing.begin(), p);
    std::vector<fs::path> made;  // those this process made (another run may make them meanwhile)
    std::string why;
    for (auto const& p : missing) {
      if (::mkdir(p.c_str(), 0777) == 0) made.push_back(p);
      else if (errno != EEXIST) {
        why = std::strerror(errno);
        break;
      }
    }
    if (why.empty()) {
      std::string probe = (full.parent_path() / ".ksweep-probe-XXXXXX").string();
      if (::mkdtemp(probe.data()) == nullptr) why = std::strerror(errno);
      else ::rmdir(probe.c_str());
    }
    for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());  // empty, and ours
    KSWEEP_REQUIRE(why.empty(), "cannot create the output folder " << io::shown_path(path) << ": " << why);
    return;
  }
  KSWEEP_REQUIRE(fs::is_directory(status),
                 "the output folder " << io::shown_path(path) << " exists and is not a folder");
  KSWEEP_REQUIRE(::access(path.c_str(), W_OK | X_OK) == 0,
                 "the output folder " << io::shown_path(path) << " is not writable: " << std::strerror(errno));
  if (probe_lock) {
    int const fd = lock_folder(path);
    if (fd < 0 && errno == EWOULDBLOCK) refuse_locked(path);
    if (fd >= 0) ::close(fd);
  }
  auto const found = results_in(path);
  if (!found.empty() && !overwrite && !resume_in_place) {
    std::string list;
    for (std::size_t i = 0; i < found.size() && i < 8; ++i) list += (i ? ", " : "") + found[i];
    if (found.size() > 8) list += ", ...";
    KSWEEP_REQUIRE(false, "the output folder " << io::shown_path(path) << " holds the results of another run (" << list
                                               << "); choose a new folder, continue that run with --resume "
                                               << shown(path.string()) << ", or replace its results with --overwrite");
  }
  if (!overwrite) return;
  // --overwrite replaces the folder's results: none of them may be an input of this run.
  fs::path const root = resolved(path);
  for (auto const& in : inputs) {
    if (in.path.empty()) continue;
    fs::path const p = resolved(in.path);
    auto const rel = p.lexically_relative(root);
    if (rel.empty() || *rel.begin() == ".." || rel == ".") continue;
    std::string const first = rel.begin()->string();
    auto const& names = result_names();
    KSWEEP_REQUIRE(std::find(names.begin(), names.end(), first) == names.end(),
                   "--overwrite would replace " << io::shown_path(root / first) << ", which holds " << in.key << " = "
                                                << io::shown_path(in.path)
                                                << ", an input of this run; copy it out of the output folder "
                                                   "(and point "
                                                << in.key << " at the copy), or choose another output folder");
  }
}

}  // namespace

void check_output_folder(fs::path const& path, bool overwrite, bool resume_in_place,
                         std::vector<RunInput> const& inputs) {
  check_folder(path, overwrite, resume_in_place, inputs, true);
}

OutputFolder::OutputFolder(fs::path path, bool overwrite, bool resume_in_place, bool root, std::vector<RunInput> inputs)
    : m_path(std::move(path)), m_overwrite(overwrite), m_root(root) {
  if (!m_root) return;
  std::error_code ec;
  auto const status = fs::status(m_path, ec);
  KSWEEP_REQUIRE(!fs::exists(status) || fs::is_directory(status),
                 "the output folder " << io::shown_path(m_path) << " exists and is not a folder");
  // A symbolic link whose target does not exist: mkdir cannot make the folder through it.
  if (!fs::exists(status) && fs::is_symlink(fs::symlink_status(m_path, ec))) {
    auto const target = fs::read_symlink(m_path, ec);
    KSWEEP_REQUIRE(false, "the output folder "
                              << io::shown_path(m_path) << " is a symbolic link to " << io::shown_path(target)
                              << ", which does not exist: create that folder, or give -o another path");
  }
  check_output_folder(m_path, overwrite, resume_in_place, inputs);  // cheap, before creating anything
  if (!fs::exists(status)) {
    fs::path const parent = fs::absolute(m_path).parent_path();
    // Made by this run only when its own mkdir succeeds: another run may make it meanwhile (and
    // another run's probe may remove an empty parent meanwhile: tried twice).
    int err = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      fs::create_directories(parent, ec);
      m_created = ::mkdir(m_path.c_str(), 0777) == 0;
      err = errno;
      if (m_created || err != ENOENT) break;
    }
    KSWEEP_REQUIRE(m_created || err == EEXIST,
                   "cannot create the output folder " << io::shown_path(m_path) << ": " << std::strerror(err));
  }
  m_lock = lock_folder(m_path);
  if (m_lock < 0) {
    int const err = errno;
    m_created = false;  // another run may own it now
    if (err == EWOULDBLOCK) refuse_locked(m_path);
    KSWEEP_REQUIRE(false, "cannot lock the output folder " << io::shown_path(m_path) << ": " << std::strerror(err));
  }
  try {
    // Again under the lock: another run may have written its results since the first check.
    check_folder(m_path, overwrite, resume_in_place, inputs, false);
  } catch (...) {
    ::close(m_lock);
    m_lock = -1;
    throw;
  }
}

OutputFolder::~OutputFolder() {
  if (!m_root) return;
  std::error_code ec;
  if (m_claimed && !m_finished) {
    // Result folders this run made and left empty are no results of anyone's.
    for (auto const& name : result_names())
      if (fs::is_directory(m_path / name, ec) && !holds_a_file(m_path / name)) fs::remove_all(m_path / name, ec);
    if (!m_aside.empty()) {
      if (results_in(m_path).empty()) {  // this run wrote nothing: the earlier results go back
        for (auto const& e : fs::directory_iterator(m_aside, ec))
          fs::rename(e.path(), m_path / e.path().filename(), ec);
        fs::remove(m_aside, ec);
      } else {
        std::fprintf(stderr, "ksweep: the results this run was replacing (--overwrite) are kept in %s\n",
                     io::shown_path(m_aside).c_str());
      }
    }
  }
  // Removed while still locked, so that no other run takes a folder about to go.
  if (!m_finished && m_created) {
    auto const entries = std::distance(fs::directory_iterator(m_path, ec), fs::directory_iterator());
    if (!ec && (entries == 0 || (entries == 1 && fs::exists(m_path / lock_file_name, ec)))) fs::remove_all(m_path, ec);
  }
  if (m_lock >= 0) ::close(m_lock);
}

void OutputFolder::claim() {
  if (!m_root || m_claimed) return;
  m_claimed = true;
  if (!m_overwrite) return;
  auto const found = results_in(m_path);
  if (found.empty()) return;
  // Moved aside, not removed: renames within the folder, undone if the run writes nothing.
  char stamp[32];
  std::time_t const now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", std::gmtime(&now));
  m_aside = m_path / (std::string(aside_prefix) + stamp + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directory(m_aside, ec);
  KSWEEP_REQUIRE(!ec, "--overwrite: cannot create " << io::shown_path(m_aside) << ": " << ec.message());
  for (auto const& name : found) {
    std::string const plain = name.back() == '/' ? name.substr(0, name.size() - 1) : name;
    fs::rename(m_path / plain, m_aside / plain, ec);
    KSWEEP_REQUIRE(!ec, "--overwrite: cannot move " << io::shown_path(m_path / plain) << " aside: " << ec.message());
  }
  // Empty result folders of a failed run are not moved; they go.
  for (auto const& n : result_names())
    if (fs::is_directory(m_path / n, ec) && !holds_a_file(m_path / n)) fs::remove_all(m_path / n, ec);
}

void OutputFolder::finish() {
  if (!m_root || m_finished) return;
  m_finished = true;
  std::error_code ec;
  if (!m_aside.empty()) fs::remove_all(m_aside, ec);  // the results this run replaced
  if (ec)
    std::fprintf(stderr, "ksweep: warning: cannot remove %s (the replaced results): %s\n",
                 io::shown_path(m_aside).c_str(), ec.message().c_str());
  // Results kept aside by earlier --overwrite runs that failed are another run's: kept, and said.
  for (auto const& e : fs::directory_iterator(m_path, ec))
    if (e.path().filename().string().rfind(aside_prefix, 0) == 0)
      std::fprintf(stderr,
                   "ksweep: note: %s holds the results an earlier --overwrite run that failed was replacing; remove "
                   "it when they are no longer needed\n",
                   io::shown_path(e.path()).c_str());
}

std::string resume_command(std::vector<std::string> const& argv, fs::path const& out, int ranks) {
  std::string cmd = ranks > 1 ? "mpirun -n " + std::to_string(ranks) : std::string();
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string const& a = argv[i];
    if (a == "--resume") {
      ++i;
      continue;
    }
    if (a.rfind("--resume=", 0) == 0 || a == "--overwrite" || a == "--dry-run") continue;
    cmd += (cmd.empty() ? "" : " ") + quote_arg(a);
  }
  return cmd + " --resume " + quote_arg(out.string());
}

}  // namespace ksweep::app
