// ksweep: the command-line program (info, model, fwi).

#include "common.hpp"
#include "guard.hpp"

#include <ksweep/comm/communicator.hpp>
#include <ksweep/base/config.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

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
  if (!comm.is_root()) return 0;
  std::printf("%s", ksweep::core::describe_build(false).c_str());
  std::printf("MPI ranks: %d\n", comm.size());
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

}  // namespace

int main(int argc, char** argv) {
  ksweep::comm::Environment mpi(argc, argv);
  ksweep::comm::Communicator comm;
  ksweep::app::install_signal_handlers();
  CLI::App app{"ksweep: 2D and 3D acoustic modelling and full-waveform inversion"};
  app.require_subcommand(1);
  std::string config;
  std::vector<std::string> sets;
  ksweep::app::RunOptions opt;
  for (int i = 0; i < argc; ++i) opt.argv.emplace_back(argv[i]);
  std::string out;
  auto* info = app.add_subcommand("info", "backends, Kokkos configuration, threads, MPI, versions");
  auto* model = app.add_subcommand("model", "forward-model every shot of a config into OUT/observed.h5");
  auto* fwi = app.add_subcommand("fwi", "full-waveform inversion (MPI shot-parallel)");
  for (auto* sc : {model, fwi}) {
    sc->add_option("--config,-c", config, "TOML configuration file")->required()->check(CLI::ExistingFile);
    sc->add_option("--out,-o", out, "output folder")->required();
    sc->add_option("--set", sets, "override: section.key=value (repeatable)")->take_all();
    sc->add_flag("--overwrite", opt.overwrite, "replace the results of another run in the output folder");
    sc->add_flag("--dry-run", opt.dry_run, "check the inputs, print the memory estimate and exit (writes nothing)");
  }
  fwi->add_option("--resume", opt.resume, "folder of an earlier run whose checkpoint to continue from");
  try {
    app.parse(argc, argv);
  } catch (CLI::ParseError const& e) {
    return comm.is_root() ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
  }
  opt.out = out;
  int rc = 0;
  try {
    ksweep::core::KokkosSession kokkos(argc, argv);
    try {
      if (*info) {
        rc = run_info(comm);
      } else {
        auto const cfg = ksweep::io::load_config(config, sets);
        if (*model) rc = ksweep::app::run_model(cfg, opt, comm);
        else rc = ksweep::app::run_fwi(cfg, opt, comm);
      }
    } catch (ksweep::app::Interrupted const& e) {
      // Every rank got here at the same point; the scratch folders were removed on the way.
      if (comm.is_root()) std::fprintf(stderr, "ksweep: %s\n", e.what());
      std::fflush(stderr);
      rc = 128 + e.signal();
    } catch (ksweep::app::CollectiveError const& e) {
      if (comm.is_root()) std::fprintf(stderr, "ksweep: error: %s\n", e.what());
      std::fflush(stderr);
      rc = 1;
    }
  } catch (std::bad_alloc const& e) {
    comm.abort(out_of_memory(e.what()), 1);
  } catch (std::exception const& e) {
    std::string const what = e.what();
    if (what.find("failed to allocate") != std::string::npos) comm.abort(out_of_memory(what), 1);
    comm.abort(explain_errors(e.what()), 1);
  }
  return rc;
}
