#include "common.hpp"
#include "guard.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/core/runtime.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

namespace ksweep::app {

namespace {
fs::path python_dir() {
  if (char const* e = std::getenv("KSWEEP_PYTHON_DIR")) return e;
  fs::path const src = fs::path(KSWEEP_SOURCE_DIR) / "drivers" / "python";
  if (fs::exists(src / "plot_gather.py")) return src;
  return fs::path(KSWEEP_INSTALL_DATADIR) / "python";
}
std::string quote(std::string const& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

bool run_figure_script(std::string const& script, std::vector<std::string> const& args) {
  char const* py = std::getenv("KSWEEP_PYTHON");
  std::string cmd = quote(py ? py : KSWEEP_PYTHON_EXECUTABLE) + " " + quote((python_dir() / script).string());
  for (auto const& a : args) cmd += " " + quote(a);
  int const rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::fprintf(stderr, "ksweep: warning: figure script %s failed (exit %d); the data files are complete\n",
                 script.c_str(), WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
    return false;
  }
  return true;
}

void make_directory(fs::path const& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  KSWEEP_REQUIRE(!ec && fs::is_directory(dir),
                 "cannot create the output folder " << dir.string() << ": " << ec.message());
}

void remove_if_empty(fs::path const& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec) && fs::is_empty(dir, ec) && !ec) fs::remove(dir, ec);
}

std::string format_seconds(double s) {
  long const t = std::lround(std::max(0.0, s));
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

void warn(std::vector<std::string> const& warnings) {
  for (auto const& w : warnings)
    if (!w.empty()) std::fprintf(stderr, "ksweep: %s\n", w.c_str());
}

core::Survey checked_survey(io::Config const& cfg, io::VelocityModel const& shape, comm::Communicator const& comm) {
  return on_every_rank(comm, [&] {
    core::ModelGrid const grid = model_grid(shape);
    auto s = acquisition(cfg, shape);
    core::check_time(cfg.time.dt, cfg.time.nt);
    core::check_grid(grid, make_pml(cfg), cfg.propagator.order);
    core::check_survey(s, grid, make_pml(cfg));
    return s;
  });
}

}  // namespace ksweep::app
