#include <ksweep/base/error.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/stencil.hpp>

#include <cmath>
#include <sstream>

namespace ksweep::core {

Survey Survey::select(std::vector<int> const& shots) const {
  Survey out;
  out.n_shots = static_cast<int>(shots.size());
  out.n_sources = n_sources;
  out.n_receivers = n_receivers;
  for (int s : shots) {
    KSWEEP_REQUIRE(s >= 0 && s < n_shots,
                   "ksweep::core::Survey::select: shot " << s << " is outside [0, " << n_shots << ")");
    for (int i = 0; i < n_sources; ++i) out.sources.push_back(sources[s * n_sources + i]);
    for (int i = 0; i < n_receivers; ++i) out.receivers.push_back(receivers[s * n_receivers + i]);
  }
  return out;
}

Layout::Layout(ModelGrid const& grid, PmlConfig const& pml, int order, int radius_)
    : dim(grid.dim()),
      nz(grid.nz),
      ny(grid.dim() == 3 ? grid.ny : 1),
      nx(grid.nx),
      top(pml.face(PmlConfig::top)),
      bottom(pml.face(PmlConfig::bottom)),
      front(grid.dim() == 3 ? pml.face(PmlConfig::front) : 0),
      back(grid.dim() == 3 ? pml.face(PmlConfig::back) : 0),
      left(pml.face(PmlConfig::left)),
      right(pml.face(PmlConfig::right)),
      radius(radius_ < 0 ? order / 2 : radius_),
      NZ(nz + top + bottom),
      NY(ny + front + back),
      NX(nx + left + right),
      free_surface(pml.free_surface) {}

void check_grid(ModelGrid const& grid, PmlConfig const& pml, int order, int radius) {
  names::order.parse(std::to_string(order));
  int const m = radius < 0 ? order / 2 : radius;
  KSWEEP_REQUIRE(std::isfinite(grid.dh) && grid.dh > 0, "grid spacing dh = " << grid.dh << " must be > 0");
  int const min_cells = 2 * m + 1;
  KSWEEP_REQUIRE(grid.dim() == 3 || grid.ny == 1, "model grid: a plane has ny = 1, not " << grid.ny);
  bool const three = grid.dim() == 3;
  KSWEEP_REQUIRE(grid.nz >= min_cells && grid.nx >= min_cells && (!three || grid.ny >= min_cells),
                 "model grid " << grid.nz << " x " << (three ? std::to_string(grid.ny) + " x " : std::string())
                               << grid.nx << " is too small for order " << order << ": each dimension needs at least "
                               << min_cells << " cells");
  KSWEEP_REQUIRE(grid.cells() < (1LL << 31),
                 "model grid of " << grid.cells() << " cells exceeds the limit of 2^31 - 1 cells");
  char const* const face_names[6] = {"top", "bottom", "front", "back", "left", "right"};
  for (int f = 0; f < 6; ++f) {
    if ((f == PmlConfig::front || f == PmlConfig::back) && !three) continue;
    if (f == PmlConfig::top && pml.free_surface) continue;
    int const w = pml.face(f);
    std::string const what =
        pml.faces[f] >= 0 ? std::string("propagator.pml_") + face_names[f] : std::string("propagator.pml_width");
    KSWEEP_REQUIRE(w >= m, what << " = " << w << " is too small for order " << order << ": it must be >= " << m
                                << " (the stencil radius)");
    KSWEEP_REQUIRE(w <= 1000, what << " = " << w << " exceeds the limit 1000");
  }
  KSWEEP_REQUIRE(std::isfinite(pml.reflection) && pml.reflection > 0 && pml.reflection < 1,
                 "propagator.pml_reflection = " << pml.reflection << " must be in (0, 1)");
  KSWEEP_REQUIRE(std::isfinite(pml.freq) && pml.freq >= 0, "propagator.pml_freq = " << pml.freq << " must be >= 0");
  if (pml.free_surface) {
    KSWEEP_REQUIRE(grid.nz >= 2 * m + 2, "model grid nz = " << grid.nz << " is too small for a free surface at order "
                                                            << order << ": it must be >= " << 2 * m + 2);
  }
  Layout const l(grid, pml, order, m);
  KSWEEP_REQUIRE(static_cast<long long>(l.field_rows()) * (l.NX + 2 * m) < (1LL << 31),
                 "padded grid of " << static_cast<long long>(l.field_rows()) * (l.NX + 2 * m)
                                   << " cells exceeds the limit of 2^31 - 1 cells per shot");
}

void check_time(double dt, int nt) {
  KSWEEP_REQUIRE(std::isfinite(dt) && dt > 0, "time.dt = " << dt << " must be > 0");
  KSWEEP_REQUIRE(nt > 0, "time.nt = " << nt << " must be > 0");
}

namespace {
template <class T>
void check_positive(T const* x, long long n, char const* what, char const* unit, char const* plural) {
  for (long long i = 0; i < n; ++i)
    KSWEEP_REQUIRE(std::isfinite(x[i]) && x[i] > 0,
                   what << " at cell " << i << " is " << x[i] << unit << ": " << plural << " must be finite and > 0");
}
}  // namespace

void check_velocity(float const* vp, long long n) { check_positive(vp, n, "velocity", "", "velocities"); }
void check_velocity(double const* vp, long long n) { check_positive(vp, n, "velocity", "", "velocities"); }
void check_density(float const* rho, long long n) { check_positive(rho, n, "density", " kg/m^3", "densities"); }
void check_density(double const* rho, long long n) { check_positive(rho, n, "density", " kg/m^3", "densities"); }

void check_cfl(double vmax, double dt, double dh, int order, int dim) {
  double const courant = vmax * dt / dh;
  double const limit = courant_limit(order, dim);
  KSWEEP_REQUIRE(courant <= limit,
                 "unstable time step: vmax * dt / dh = " << vmax << " * " << dt << " / " << dh << " = " << courant
                                                         << " exceeds the CFL limit " << limit << " of order " << order
                                                         << " (dt must be <= " << limit * dh / vmax << " s)");
}

void check_survey(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml) {
  KSWEEP_REQUIRE(survey.n_shots >= 1, "survey has " << survey.n_shots << " shots; at least 1 is needed");
  KSWEEP_REQUIRE(survey.n_sources >= 1, "survey has " << survey.n_sources << " sources per shot; at least 1 is needed");
  KSWEEP_REQUIRE(survey.n_receivers >= 1,
                 "survey has " << survey.n_receivers << " receivers per shot; at least 1 is needed");
  KSWEEP_REQUIRE(
      static_cast<long long>(survey.sources.size()) == static_cast<long long>(survey.n_shots) * survey.n_sources,
      "survey lists " << survey.sources.size()
                      << " sources, expected n_shots * n_sources = " << survey.n_shots * survey.n_sources);
  KSWEEP_REQUIRE(
      static_cast<long long>(survey.receivers.size()) == static_cast<long long>(survey.n_shots) * survey.n_receivers,
      "survey lists " << survey.receivers.size()
                      << " receivers, expected n_shots * n_receivers = " << survey.n_shots * survey.n_receivers);
  int const zmin = pml.free_surface ? 1 : 0;
  bool const three = grid.dim() == 3;
  int const ny = three ? grid.ny : 1;
  auto check = [&](Cell const& c, char const* what, std::size_t i) {
    bool const inside = c.z >= zmin && c.z < grid.nz && c.x >= 0 && c.x < grid.nx && c.y >= 0 && c.y < ny;
    if (three) {
      KSWEEP_REQUIRE(
          inside, what << " " << i << " at (z, y, x) = (" << c.z << ", " << c.y << ", " << c.x
                       << ") is outside the model grid: z must be in [" << zmin << ", " << grid.nz - 1 << "], y in [0, "
                       << ny - 1 << "] and x in [0, " << grid.nx - 1 << "]"
                       << (pml.free_surface && c.z == 0 ? " (z = 0 is the free surface, where pressure is zero)" : ""));
    } else {
      KSWEEP_REQUIRE(
          inside, what << " " << i << " at (z, x) = (" << c.z << ", " << c.x
                       << ") is outside the model grid: z must be in [" << zmin << ", " << grid.nz - 1
                       << "] and x in [0, " << grid.nx - 1 << "]"
                       << (c.y != 0 ? " (y = " + std::to_string(c.y) + " on a 2D grid)" : std::string())
                       << (pml.free_surface && c.z == 0 ? " (z = 0 is the free surface, where pressure is zero)" : ""));
    }
  };
  for (std::size_t i = 0; i < survey.sources.size(); ++i) check(survey.sources[i], "source", i);
  for (std::size_t i = 0; i < survey.receivers.size(); ++i) check(survey.receivers[i], "receiver", i);
}

std::string sampling_warning(double vmin, double freq, double dh, double min_points) {
  if (!(freq > 0)) return {};
  double const lambda_min = vmin / (2.5 * freq);
  double const points = lambda_min / dh;
  if (points >= min_points) return {};
  std::ostringstream os;
  os << "warning: the wavelet is under-sampled: " << points << " cells per shortest wavelength (vmin " << vmin
     << " m/s / (2.5 * " << freq << " Hz) = " << lambda_min << " m, dh = " << dh << " m); at least " << min_points
     << " are advised (lower wavelet.freq below " << vmin / (2.5 * min_points * dh) << " Hz or refine the grid)";
  return os.str();
}

}  // namespace ksweep::core
