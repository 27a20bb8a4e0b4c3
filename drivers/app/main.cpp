// ksweep: the command-line program (info, model, fwi, rtm, keys).

#include "common.hpp"
#include "guard.hpp"

#include <ksweep/comm/communicator.hpp>
#include <ksweep/base/config.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/fwi/domains.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/keys.hpp>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <atomic>
#include <csignal>
#include <cstdlib>

#include <sys/resource.h>
#include <unistd.h>

#if KSWEEP_ENABLE_HDF5
#include <hdf5.h>
#endif

namespace {

/// The registry of allowed names (ksweep/base/names.hpp): each option, its names and what each
/// does.
void print_names() {
  std::printf("Configuration names:\n");
  for (auto const* option : ksweep::names::options) {
    std::printf("  %.*s: %s\n", static_cast<int>(option->key.size()), option->key.data(), option->allowed().c_str());
    for (auto const& c : *option)
      std::printf("    %-9.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                  static_cast<int>(c.description.size()), c.description.data());
  }
}

int run_info(ksweep::comm::Communicator const& comm) {
  auto const devices = ksweep::app::rank_devices(comm);
  if (!comm.is_root()) return 0;
  std::printf("%s", ksweep::core::describe_build(false).c_str());
  std::printf("MPI ranks: %d; device data to MPI: %s\n", comm.size(), ksweep::comm::gpu_aware_mpi_reason().c_str());
  for (auto const& d : devices)
    std::printf("  rank %d (%s, local rank %d): %s\n", d.rank, d.host.c_str(), d.local_rank, d.device.c_str());
  std::printf("host threads (rank 0): %s\n", ksweep::core::HostThreads::chosen().description.c_str());
#if KSWEEP_ENABLE_HDF5
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  std::printf("HDF5 %u.%u.%u\n", maj, min, rel);
#endif
  std::printf("Kokkos configuration:\n");
  Kokkos::print_configuration(std::cout, false);
  print_names();
  return 0;
}

/// Names the cause of a full disk or a file-size limit in messages from layers that give only
/// the system's wording.
std::string explain_errors(std::string msg) {
  for (int err : {ENOSPC, EFBIG}) {
    std::string const text = std::strerror(err);
    auto const pos = msg.find(text);
    if (pos != std::string::npos && msg.find(err == ENOSPC ? "(ENOSPC" : "(EFBIG") == std::string::npos)
      msg.insert(pos + text.size(), " (" + ksweep::io::describe_errno(err).substr(text.size() + 2));
  }
  return msg;
}

/// The message for an allocation that failed (std::bad_alloc, or Kokkos' allocation error,
/// whose label and size are kept and the rest of whose text is not).
std::string out_of_memory(std::string const& what) {
  std::string detail;
  auto const label = what.find("label \"");
  if (label != std::string::npos) {
    auto const end = what.find('"', label + 7);
    detail = " allocating " + what.substr(label + 7, end - label - 7);
    auto const size = what.find("Allocation of size ");
    auto const failed = what.find(" failed", size);
    if (size != std::string::npos && failed != std::string::npos)
      detail += " (" + what.substr(size + 19, failed - size - 19) + "B)";
  }
  return "out of memory" + detail +
         ": the run needs more memory than this process may use; `ksweep fwi --dry-run` (or `ksweep model "
         "--dry-run`) prints the estimate of each component; use fewer shots per launch, storage.location = \"disk\" "
         "or a smaller storage.dtype";
}

/// The configuration, loaded by every rank; a rank that cannot load it stops every rank
/// (CollectiveError), and every rank must have loaded the same one.
ksweep::io::Config load_config_on_every_rank(ksweep::comm::Communicator const& comm, std::string const& file,
                                             std::vector<std::string> const& sets) {
  auto cfg = ksweep::app::on_every_rank(comm, [&] { return ksweep::io::load_config(file, sets); });
  if (comm.size() > 1) {
    ksweep::app::agree_on(comm, "the configuration (the file's contents differ between ranks)",
                          ksweep::io::config_to_json(cfg).dump());
  }
  return cfg;
}

// --- Start-up ------------------------------------------------------------------------------
// MPI, Kokkos and the OpenMP runtime may end the process themselves when they cannot start
// (exit() or abort(), with their own wording, e.g. under a tight `ulimit -v`). While one of
// them starts, a line of ksweep's own says which and the likely cause.

char g_startup_line[512] = {};  // written before each phase: no allocation when it is needed
std::atomic<bool> g_starting{false};

void say_startup_failure() {
  if (!g_starting.exchange(false)) return;
  ssize_t const rc = ::write(STDERR_FILENO, g_startup_line, std::strlen(g_startup_line));
  (void)rc;
}

extern "C" void startup_exit() { say_startup_failure(); }

extern "C" void startup_abort(int sig) {
  say_startup_failure();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void begin_startup(char const* what) {
  std::string limit = "none";
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    limit = std::to_string(rl.rlim_cur / 1024) + " KiB";
  std::snprintf(g_startup_line, sizeof g_startup_line,
                "ksweep: error: cannot start %s (its message, if any, is above); the process may use at most %s of "
                "virtual memory (ulimit -v): MPI, the OpenMP runtime and Kokkos reserve address space for their "
                "threads and buffers, so raise the limit (ulimit -v unlimited)\n",
                what, limit.c_str());
  g_starting = true;
}

void end_startup() { g_starting = false; }

bool known_subcommand(std::string const& s) {
  return s == "info" || s == "model" || s == "fwi" || s == "rtm" || s == "keys";
}

}  // namespace

/// Open MPI ends a process whose MPI_Init fails with _exit(), past any handler of ours: under a
/// tight address-space limit, ksweep says beforehand what the library's message will mean.
void warn_low_address_space() {
  struct rlimit fs {};
  if (::getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && fs.rlim_cur < (rlim_t(8) << 20))
    std::fprintf(stderr,
                 "ksweep: warning: files of this process may hold at most %llu KiB (ulimit -f %llu); MPI creates "
                 "shared-memory files of a few MiB when it starts and ends the process with its own message "
                 "(\"MPI_Init\", \"opal\") when it cannot; raise the limit (ulimit -f unlimited)\n",
                 static_cast<unsigned long long>(fs.rlim_cur >> 10),
                 static_cast<unsigned long long>(fs.rlim_cur >> 10));
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t(512) << 20)) return;
  std::fprintf(
      stderr,
      "ksweep: warning: this process may use only %llu MiB of virtual memory (ulimit -v %llu); starting MPI, "
      "the OpenMP runtime and Kokkos takes about 300 MiB of it, and when it runs out they end the process with "
      "their own message (\"MPI_INIT\", \"opal_init\", \"libgomp\"): raise the limit (ulimit -v unlimited)\n",
      static_cast<unsigned long long>(rl.rlim_cur >> 20), static_cast<unsigned long long>(rl.rlim_cur >> 10));
}

namespace {

/// Every rank must run the same command: compared before anything else, since a rank running
/// `model` beside one running `fwi`, or with other options, would otherwise hang or end in a
/// raw MPI error. Returns false (said once) when they differ.
bool same_command_everywhere(ksweep::comm::Communicator const& comm, int argc, char** argv) {
  std::string args;
  for (int i = 1; i < argc; ++i) args += std::string(argv[i]) + '\n';
  try {
    ksweep::comm::agree_on(comm, "the command line (subcommand, options and --set values)", args);
  } catch (ksweep::comm::CollectiveError const& e) {
    if (comm.is_root() && *e.what() != '\0') std::fprintf(stderr, "ksweep: error: %s\n", e.what());
    return false;
  }
  return true;
}

/// The command line: the subcommands and their options.
struct Command {
  CLI::App app{"ksweep: 2D and 3D acoustic modelling and full-waveform inversion"};
  CLI::App* info = app.add_subcommand("info", "backends, Kokkos configuration, threads, MPI, versions");
  CLI::App* model = app.add_subcommand("model", "forward-model every shot of a config into OUT/observed.h5");
  CLI::App* fwi = app.add_subcommand("fwi", "full-waveform inversion (MPI shot-parallel)");
  CLI::App* rtm = app.add_subcommand(
      "rtm", "reverse-time migration (and least-squares RTM) on the smoothed model into OUT/image.h5");
  CLI::App* keys = app.add_subcommand("keys", "the configuration keys: type, default, allowed values, meaning");
  std::string config, out;
  std::vector<std::string> sets;
  bool markdown = false;
  ksweep::app::RunOptions opt;

  Command(int argc, char** argv) {
    app.require_subcommand(1);
    for (int i = 0; i < argc; ++i) opt.argv.emplace_back(argv[i]);
    keys->add_flag("--markdown", markdown, "as the README's Markdown table");
    for (auto* sc : {model, fwi, rtm}) {
      sc->add_option("--config,-c", config, "TOML configuration file")->required()->check(CLI::ExistingFile);
      sc->add_option("--out,-o", out, "output folder")->required();
      sc->add_option("--set", sets, "override: section.key=value (repeatable)")->take_all();
      sc->add_flag("--overwrite", opt.overwrite, "replace the results of another run in the output folder");
      sc->add_flag("--dry-run", opt.dry_run,
                   sc == rtm ? "check the inputs and exit (writes nothing)"
                             : "check the inputs, print the memory estimate and exit (writes nothing)");
    }
    fwi->add_option("--resume", opt.resume, "folder of an earlier run whose checkpoint to continue from");
  }

  /// Parses the arguments; returns the exit code when the program ends here (help, `keys`, a
  /// usage error, said on rank 0), else -1.
  int parse(ksweep::comm::Communicator const& comm, int argc, char** argv) {
    if (argc >= 2 && argv[1][0] != '-' && !known_subcommand(argv[1])) {
      if (comm.is_root())
        std::fprintf(
            stderr,
            "ksweep: error: unknown subcommand '%s' (allowed: info, model, fwi, rtm, keys); see ksweep --help\n",
            ksweep::shown(argv[1]).c_str());
      return 2;
    }
    try {
      app.parse(argc, argv);
    } catch (CLI::ParseError const& e) {
      if (e.get_exit_code() == 0) return comm.is_root() ? app.exit(e) : 0;  // --help
      if (comm.is_root())
        std::fprintf(stderr, "ksweep: error: %s; see ksweep --help\n", ksweep::shown(e.what(), 2000).c_str());
      return 2;
    }
    opt.out = out;
    if ((*fwi || *model || *rtm) && out.empty()) {
      if (comm.is_root()) std::fprintf(stderr, "ksweep: error: --out '' names no folder: give the output folder\n");
      return 2;
    }
    if (*fwi && fwi->count("--resume") > 0 && opt.resume.empty()) {
      if (comm.is_root())
        std::fprintf(stderr,
                     "ksweep: error: --resume '' names no folder: give the output folder of the run to "
                     "continue (the one holding its checkpoint.bin)\n");
      return 2;
    }
    if (*keys) {
      if (comm.is_root())
        std::fputs((markdown ? ksweep::io::key_table_markdown() : ksweep::io::key_table_text()).c_str(), stdout);
      return 0;
    }
    return -1;
  }

  /// Runs the subcommand with Kokkos started; a stop or an error found by every rank becomes the
  /// exit code (128 + signal, or 1), said once; any other error ends every rank (MPI_Abort).
  int run(ksweep::comm::Communicator const& comm, int argc, char** argv) const {
    try {
      // The run's switches, checked on every build before anything starts (KSWEEP_CUDA_GRAPHS
      // by the session).
      (void)ksweep::comm::gpu_aware_mpi_switch();
      (void)ksweep::fwi::overlap_from_environment();
      begin_startup("Kokkos");
      ksweep::core::KokkosSession kokkos(argc, argv, comm.local_rank());
      end_startup();
      try {
        if (*info) return run_info(comm);
        auto const cfg = load_config_on_every_rank(comm, config, sets);
        if (*rtm) return ksweep::app::run_rtm(cfg, opt, comm);
        return *model ? ksweep::app::run_model(cfg, opt, comm) : ksweep::app::run_fwi(cfg, opt, comm);
      } catch (ksweep::app::Interrupted const& e) {
        // Every rank got here at the same point; the scratch folders were removed on the way.
        if (comm.is_root()) std::fprintf(stderr, "ksweep: %s\n", e.what());
        std::fflush(stderr);
        return 128 + e.signal();
      } catch (ksweep::comm::CollectiveError const& e) {
        if (comm.is_root() && *e.what() != '\0') std::fprintf(stderr, "ksweep: error: %s\n", e.what());
        std::fflush(stderr);
        return 1;
      }
    } catch (std::bad_alloc const& e) {
      end_startup();
      comm.abort(out_of_memory(e.what()), 1);
    } catch (std::exception const& e) {
      end_startup();
      std::string const what = e.what();
      if (what.find("failed to allocate") != std::string::npos) comm.abort(out_of_memory(what), 1);
      comm.abort(explain_errors(e.what()), 1);
    }
    return 1;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::atexit(startup_exit);
  std::signal(SIGABRT, startup_abort);
  warn_low_address_space();
  begin_startup("MPI (MPI_Init)");
  ksweep::comm::Environment mpi(argc, argv);
  ksweep::comm::Communicator comm;
  end_startup();
  ksweep::app::install_signal_handlers();
  if (!same_command_everywhere(comm, argc, argv)) return 1;
  Command command(argc, argv);
  if (int const rc = command.parse(comm, argc, argv); rc >= 0) return rc;
  return command.run(comm, argc, argv);
}
