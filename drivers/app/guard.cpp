#include "guard.hpp"

#include <ksweep/base/error.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>

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

int agree_stop(comm::Communicator const& comm, bool locally_stopped) {
  int const mine = stop_signal() != 0 ? stop_signal() : (locally_stopped ? SIGTERM : 0);
  if (comm.size() == 1) return mine;
  double v[2] = {static_cast<double>(mine), mine != 0 ? 1.0 : 0.0};
  comm.allreduce_sum(v, 2);
  if (v[1] == 0) return 0;
  return mine != 0 ? mine : static_cast<int>(v[0] / v[1] + 0.5);
}

std::vector<std::string> const& result_names() {
  static std::vector<std::string> const names{"summary.json",   "checkpoint.bin", "observed.h5",
                                              "model_final.h5", "true_model.h5",  "initial_model.h5",
                                              "models",         "epochs",         "figures"};
  return names;
}

std::vector<std::string> results_in(fs::path const& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (auto const& e : fs::directory_iterator(dir, ec)) {
    std::string const name = e.path().filename().string();
    auto const& names = result_names();
    bool const tmp =
        (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) || name.find(".tmp.") != std::string::npos;
    if (tmp || std::find(names.begin(), names.end(), name) != names.end())
      found.push_back(name + (e.is_directory(ec) ? "/" : ""));
  }
  std::sort(found.begin(), found.end());
  return found;
}

void check_output_folder(fs::path const& path, bool overwrite, bool resume_in_place) {
  std::error_code ec;
  auto const status = fs::status(path, ec);
  if (!fs::exists(status)) return;
  KSWEEP_REQUIRE(fs::is_directory(status), "the output folder " << path.string() << " exists and is not a folder");
  auto const found = results_in(path);
  if (!found.empty() && !overwrite && !resume_in_place) {
    std::string list;
    for (std::size_t i = 0; i < found.size() && i < 8; ++i) list += (i ? ", " : "") + found[i];
    if (found.size() > 8) list += ", ...";
    KSWEEP_REQUIRE(false, "the output folder " << path.string() << " holds the results of another run (" << list
                                               << "); choose a new folder, continue that run with --resume "
                                               << path.string() << ", or replace its results with --overwrite");
  }
}

OutputFolder::OutputFolder(fs::path path, bool overwrite, bool resume_in_place, bool root)
    : m_path(std::move(path)), m_overwrite(overwrite), m_root(root) {
  if (!m_root) return;
  check_output_folder(m_path, overwrite, resume_in_place);
  std::error_code ec;
  if (!fs::exists(m_path, ec)) {
    fs::create_directories(m_path, ec);
    KSWEEP_REQUIRE(!ec && fs::is_directory(m_path), "cannot create the output folder "
                                                        << m_path.string() << ": "
                                                        << (ec ? ec.message() : std::string("not a folder")));
    m_created = true;
  }
  KSWEEP_REQUIRE(::access(m_path.c_str(), W_OK | X_OK) == 0,
                 "the output folder " << m_path.string() << " is not writable: " << std::strerror(errno));
}

OutputFolder::~OutputFolder() {
  if (!m_root || m_claimed || !m_created) return;
  std::error_code ec;
  if (fs::is_empty(m_path, ec) && !ec) fs::remove(m_path, ec);
}

void OutputFolder::claim() {
  if (!m_root || m_claimed) return;
  m_claimed = true;
  if (!m_overwrite) return;
  for (auto const& name : results_in(m_path)) {
    std::error_code ec;
    fs::remove_all(m_path / (name.back() == '/' ? name.substr(0, name.size() - 1) : name), ec);
    KSWEEP_REQUIRE(!ec, "--overwrite: cannot remove " << (m_path / name).string() << ": " << ec.message());
  }
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
