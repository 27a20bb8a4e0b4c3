// ksweep fwi's inputs (fwi_inputs.hpp): the library's checks (fwi::check_run_inputs) with the
// program's output folder, signals and messages.

#include "fwi_inputs.hpp"

#include <cstdio>
#include <string>

namespace ksweep::app {

Inputs check_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm,
                    io::VelocityModel const& shape) {
  fwi::InputHooks hooks;
  auto const files = run_inputs(cfg, opt);
  hooks.folder = [&](bool in_place) { check_output_folder(opt.out, opt.overwrite, in_place, files); };
  if (opt.dry_run) hooks.memory_table = [](std::string const& table) { std::printf("%s", table.c_str()); };
  hooks.stop_point = [](char const* doing) { throw_if_stopped(doing); };
  hooks.warn = [](std::vector<std::string> const& warnings) { warn(warnings); };
  return fwi::check_run_inputs(cfg, {opt.resume, opt.out, opt.overwrite}, hooks, comm, shape);
}

std::vector<RunInput> run_inputs(io::Config const& cfg, RunOptions const& opt) {
  std::vector<RunInput> in{{"--config", cfg.source_path}};
  std::error_code ec;
  // Every path-valued key (as load_config declares them) that names a file.
  for (auto const& [key, value] : cfg.input_paths)
    if (!value.empty() && fs::is_regular_file(value, ec)) in.push_back({key, value});
  if (!opt.resume.empty()) in.push_back({"--resume", fs::path(opt.resume) / "checkpoint.bin"});
  return in;
}

}  // namespace ksweep::app
