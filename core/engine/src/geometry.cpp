#include <ksweep/base/error.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/stencil.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ksweep::core {

Survey Survey::select(std::vector<int> const& shots) const {
  Survey out;
  out.n_shots = static_cast<int>(shots.size());
  out.n_sources = n_sources;
  out.n_receivers = n_receivers;
  auto copy = [](auto const& from, auto& to, int s, int n) {
    if (!from.empty()) to.insert(to.end(), from.begin() + std::size_t(s) * n, from.begin() + std::size_t(s + 1) * n);
  };
  for (int s : shots) {
    KSWEEP_REQUIRE(s >= 0 && s < n_shots,
                   "ksweep::core::Survey::select: shot " << s << " is outside [0, " << n_shots << ")");
    copy(sources, out.sources, s, n_sources);
    copy(receivers, out.receivers, s, n_receivers);
    copy(source_points, out.source_points, s, n_sources);
    copy(receiver_points, out.receiver_points, s, n_receivers);
    copy(receiver_count, out.receiver_count, s, 1);
    copy(away_sources, out.away_sources, s, n_sources);
    copy(away_receivers, out.away_receivers, s, n_receivers);
  }
  return out;
}

namespace {
Point at(std::vector<Point> const& points, std::vector<Cell> const& cells, std::size_t k) {
  if (!points.empty()) return points[k];
  Cell const& c = cells[k];
  return {double(c.z), double(c.x), double(c.y)};
}
bool integral(double v) { return v == std::floor(v); }
}  // namespace

Point Survey::source_at(std::size_t k) const { return at(source_points, sources, k); }
Point Survey::receiver_at(std::size_t k) const { return at(receiver_points, receivers, k); }

std::vector<double> sinc_weights(double x) {
  int const r = interpolation_radius;
  double const f = std::floor(x), b = interpolation_kaiser_b;
  std::vector<double> w(2 * r, 0.0);
  if (x == f) {
    w[r - 1] = 1.0;  // node floor(x) - r + 1 + (r - 1) = x
    return w;
  }
  double const i0b = std::cyl_bessel_i(0.0, b), pi = 3.14159265358979323846;
  for (int k = 0; k < 2 * r; ++k) {
    double const d = f - r + 1 + k - x;  // node minus position, in (-r, r)
    double const q = d / r;
    double const kaiser = std::cyl_bessel_i(0.0, b * std::sqrt(std::max(0.0, 1.0 - q * q))) / i0b;
    w[k] = std::sin(pi * d) / (pi * d) * kaiser;
  }
  return w;
}

namespace {
// "(z, x) = (.., ..) cells = (.., ..) m" (with y in 3D).
std::string position(Point const& p, ModelGrid const& grid) {
  bool const three = grid.dim() == 3;
  std::ostringstream o;
  o << (three ? "(z, y, x) = (" : "(z, x) = (") << p.z << ", " << (three ? std::to_string(p.y) + ", " : "") << p.x
    << ") cells = (" << p.z * grid.step(0) << ", " << (three ? std::to_string(p.y * grid.step(1)) + ", " : "")
    << p.x * grid.step(2) << ") m";
  return o.str();
}

// The taps of one kind of point; see PointTaps. Taps must stay in the padded grid (the model
// plus its absorbing layer).
PointTaps taps(Survey const& survey, bool receivers, ModelGrid const& grid, PmlConfig const& pml) {
  int const n = receivers ? survey.n_receivers : survey.n_sources, dim = grid.dim(), r = interpolation_radius;
  std::size_t const total = std::size_t(survey.n_shots) * n;
  auto const pos = [&](std::size_t k) { return receivers ? survey.receiver_at(k) : survey.source_at(k); };
  auto const live = [&](std::size_t k) {
    return receivers ? survey.live(int(k / n), int(k % n)) : survey.source_live(int(k / n), int(k % n));
  };
  bool on_grid = true, silent = false;
  for (std::size_t k = 0; k < total; ++k) {
    if (!live(k)) {
      silent = true;
      continue;
    }
    Point const p = pos(k);
    on_grid = on_grid && integral(p.z) && integral(p.x) && integral(p.y);
  }
  // A cell every silent point can use: the model's centre (below a free surface).
  Cell const centre{std::max(grid.nz / 2, 1), grid.nx / 2, dim == 3 ? grid.ny / 2 : 0};
  PointTaps t;
  if (on_grid) {
    for (std::size_t k = 0; k < total; ++k) {
      Point const p = pos(k);
      t.cells.push_back(live(k) ? Cell{int(p.z), int(p.x), int(p.y)} : centre);
      if (silent) t.weights.push_back(live(k) ? 1.0 : 0.0);
    }
    return t;
  }
  int const wide = 2 * r, ky = dim == 3 ? wide : 1;
  Layout const l(grid, pml, 2);  // the layer's cells per face
  t.per_point = wide * wide * ky;
  t.cells.reserve(total * t.per_point);
  t.weights.reserve(total * t.per_point);
  for (std::size_t k = 0; k < total; ++k) {
    if (!live(k)) {
      t.cells.insert(t.cells.end(), t.per_point, centre);
      t.weights.insert(t.weights.end(), t.per_point, 0.0);
      continue;
    }
    Point const p = pos(k);
    // Nodes of an axis: its window, or the node itself (weight 1, then 0s) when the position
    // is on it, so that no tap leaves the grid for nothing.
    auto nodes = [&](double x, std::vector<double>& w, std::vector<int>& at) {
      w = sinc_weights(x);
      int const f = int(std::floor(x));
      at.resize(wide);
      for (int i = 0; i < wide; ++i) at[i] = integral(x) ? f : f - r + 1 + i;
      if (integral(x)) std::rotate(w.begin(), w.begin() + (r - 1), w.end());  // 1 first
    };
    std::vector<double> wz, wx, wy{1.0};
    std::vector<int> az, ax, ay{0};
    nodes(p.z, wz, az);
    nodes(p.x, wx, ax);
    if (dim == 3) nodes(p.y, wy, ay);
    if (pml.free_surface) {
      // Image method: pressure is odd about row 0. A tap at row -m (m > 0) samples -u(m) and
      // injects into its image: its weight moves, negated, to the tap at row m (in the window,
      // since the position is below the surface); a tap on row 0 gets weight 0.
      int const z0 = az[0];
      for (int i = 0; i < wide; ++i) {
        if (az[i] > 0) continue;
        if (az[i] < 0) {
          int const image = -az[i] - z0;
          wz[image] -= wz[i];
        }
        wz[i] = 0.0;
        az[i] = 1;  // any row of the model: the weight is 0
      }
    }
    auto reach = [&](std::vector<int> const& at, int lo, int hi, char const* axis) {
      for (int c : at)
        KSWEEP_REQUIRE(c >= lo && c < hi, (receivers ? "receiver " : "source ")
                                              << k % n << " of shot " << k / n << " at " << position(p, grid)
                                              << ": its interpolation reaches " << r
                                              << " cells around it, beyond the absorbing layer (cell " << axis << " = "
                                              << c << "); move it inwards or widen the layer (propagator.pml_width)");
    };
    reach(az, -l.top, l.nz + l.bottom, "z");
    reach(ax, -l.left, l.nx + l.right, "x");
    reach(ay, -l.front, l.ny + l.back, "y");
    for (int iz = 0; iz < wide; ++iz)
      for (int iy = 0; iy < ky; ++iy)
        for (int ix = 0; ix < wide; ++ix) {
          t.cells.push_back({az[iz], ax[ix], ay[iy]});
          t.weights.push_back(wz[iz] * wy[iy] * wx[ix]);
        }
  }
  return t;
}
}  // namespace

PointTaps source_taps(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml) {
  return taps(survey, false, grid, pml);
}
PointTaps receiver_taps(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml) {
  return taps(survey, true, grid, pml);
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
      free_surface(pml.free_surface) {
  for (int a = 0; a < dim; ++a) weight[a] = grid.weight(a);
}

std::string ModelGrid::describe_spacing() const {
  std::ostringstream o;
  if (uniform()) {
    o << "dh = " << dh << " m";
    return o.str();
  }
  o << "dz = " << step(0) << " m, ";
  if (m_dim == 3) o << "dy = " << step(1) << " m, ";
  o << "dx = " << step(2) << " m";
  return o.str();
}

namespace {
char const* const face_names[6] = {"top", "bottom", "front", "back", "left", "right"};
}  // namespace

std::string describe_pml_face(PmlConfig const& pml, int f) {
  KSWEEP_REQUIRE(f >= 0 && f < 6, "ksweep::core: face " << f << " of the absorbing layer (0-5)");
  // Named as the program's configuration and Python's arguments both call it.
  bool const own = pml.faces[f] >= 0;
  std::string const key = own ? std::string("propagator.pml_") + face_names[f] : "propagator.pml_width";
  std::string const python = own ? "pml_width[" + std::to_string(f) + "]" : "pml_width";
  return key + " = " + std::to_string(pml.face(f)) + " cells (Python: " + python + "; the absorbing layer's " +
         face_names[f] + " face)";
}

void check_grid(ModelGrid const& grid, PmlConfig const& pml, int order, int radius) {
  names::order.parse(std::to_string(order));
  int const m = radius < 0 ? order / 2 : radius;
  KSWEEP_REQUIRE(std::isfinite(grid.dh) && grid.dh > 0, "grid spacing dh = " << grid.dh << " must be > 0");
  for (int g = 0; g < 3; ++g) {
    static char const* const axis[3] = {"dz", "dy", "dx"};
    KSWEEP_REQUIRE(
        std::isfinite(grid.spacing[g]) && grid.spacing[g] >= 0,
        "grid spacing " << axis[g] << " = " << grid.spacing[g] << " m must be > 0 (or 0: dh = " << grid.dh << " m)");
  }
  int const min_cells = 2 * m + 1;
  KSWEEP_REQUIRE(grid.dim() == 3 || grid.ny == 1, "model grid: a plane has ny = 1, not " << grid.ny);
  bool const three = grid.dim() == 3;
  KSWEEP_REQUIRE(grid.nz >= min_cells && grid.nx >= min_cells && (!three || grid.ny >= min_cells),
                 "model grid " << grid.nz << " x " << (three ? std::to_string(grid.ny) + " x " : std::string())
                               << grid.nx << " is too small for order " << order << ": each dimension needs at least "
                               << min_cells << " cells");
  KSWEEP_REQUIRE(grid.cells() < (1LL << 31),
                 "model grid of " << grid.cells() << " cells exceeds the limit of 2^31 - 1 cells");
  for (int f = 0; f < 6; ++f) {
    KSWEEP_REQUIRE(!pml.cut[f] || (f != PmlConfig::top && f != PmlConfig::bottom && (three || f >= PmlConfig::left)),
                   "ksweep::core: the " << face_names[f] << " face of a " << grid.dim()
                                        << "D grid cannot be cut (domains split x, and y in 3D)");
    if ((f == PmlConfig::front || f == PmlConfig::back) && !three) continue;
    if ((f == PmlConfig::top && pml.free_surface) || pml.cut[f]) continue;
    int const w = pml.face(f);
    KSWEEP_REQUIRE(w == 0 || w >= m, describe_pml_face(pml, f) << " is too small for order " << order
                                                               << ": it must be 0 (a reflecting edge) or >= " << m
                                                               << " (the stencil radius)");
    KSWEEP_REQUIRE(w <= 1000, describe_pml_face(pml, f) << " exceeds the limit 1000");
  }
  KSWEEP_REQUIRE(std::isfinite(pml.reflection) && pml.reflection > 0 && pml.reflection < 1,
                 "propagator.pml_reflection = " << pml.reflection
                                                << " (Python: pml_reflection; the absorbing layer's reflection "
                                                   "coefficient) must be in (0, 1)");
  KSWEEP_REQUIRE(
      std::isfinite(pml.freq) && pml.freq >= 0,
      "propagator.pml_freq = " << pml.freq << " Hz (Python: pml_freq; the absorbing layer's frequency) must be >= 0");
  KSWEEP_REQUIRE(std::isfinite(pml.profile_velocity) && pml.profile_velocity >= 0,
                 "ksweep::core: the damping profiles' velocity " << pml.profile_velocity << " m/s must be >= 0");
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

void parameter_error(Parameter const& p, long long cell, double value) {
  std::ostringstream os;
  os << p.noun << " at cell " << cell << " is " << value;
  if (std::isfinite(value)) os << " " << p.unit;
  os << ": " << p.plural << " must be finite and > " << p.lower;
  impl::throw_error(__FILE__, __LINE__, os.str());
}

namespace {
template <class T>
void check_field(Parameter const& p, T const* x, long long n) {
  for (long long i = 0; i < n; ++i)
    if (!(std::isfinite(x[i]) && x[i] > p.lower)) parameter_error(p, i, static_cast<double>(x[i]));
}
}  // namespace

void check_parameter(Parameter const& p, float const* x, long long n) { check_field(p, x, n); }
void check_parameter(Parameter const& p, double const* x, long long n) { check_field(p, x, n); }
void check_velocity(float const* vp, long long n) { check_field(velocity_parameter, vp, n); }
void check_velocity(double const* vp, long long n) { check_field(velocity_parameter, vp, n); }
void check_density(float const* rho, long long n) { check_field(density_parameter, rho, n); }
void check_density(double const* rho, long long n) { check_field(density_parameter, rho, n); }

void check_cfl(double vmax, double dt, double dh, int order, int dim) {
  double const courant = vmax * dt / dh;
  double const limit = courant_limit(order, dim);
  KSWEEP_REQUIRE(courant <= limit,
                 "unstable time step: vmax * dt / dh = " << vmax << " * " << dt << " / " << dh << " = " << courant
                                                         << " exceeds the CFL limit " << limit << " of order " << order
                                                         << " (dt must be <= " << limit * dh / vmax << " s)");
}

double cfl_spacing(ModelGrid const& grid) {
  if (grid.uniform()) return grid.dh;
  double s = 0;
  for (int a = 0; a < grid.dim(); ++a) s += 1.0 / (grid.axis_step(a) * grid.axis_step(a));
  return 1.0 / std::sqrt(s / grid.dim());
}

void check_cfl(double vmax, double dt, ModelGrid const& grid, int order) {
  if (grid.uniform()) return check_cfl(vmax, dt, grid.dh, order, grid.dim());
  // The leapfrog's bound v^2 dt^2 S sum_a 1 / d_a^2 <= 4, S the stencil's Nyquist symbol.
  double const h = cfl_spacing(grid), courant = vmax * dt / h, limit = courant_limit(order, grid.dim());
  KSWEEP_REQUIRE(courant <= limit, "unstable time step: vmax * dt / h = "
                                       << vmax << " * " << dt << " / " << h << " = " << courant
                                       << " (1 / h^2: the mean of 1 / d^2 over the axes, " << grid.describe_spacing()
                                       << ") exceeds the CFL limit " << limit << " of order " << order
                                       << " (dt must be <= " << limit * h / vmax << " s)");
}

void check_positions(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml) {
  KSWEEP_REQUIRE(survey.n_shots >= 1, "survey has " << survey.n_shots << " shots; at least 1 is needed");
  KSWEEP_REQUIRE(survey.n_sources >= 1, "survey has " << survey.n_sources << " sources per shot; at least 1 is needed");
  KSWEEP_REQUIRE(survey.n_receivers >= 1,
                 "survey has " << survey.n_receivers << " receivers per shot; at least 1 is needed");
  auto const shots = static_cast<std::size_t>(survey.n_shots);
  auto check_count = [&](std::size_t listed, int per_shot, char const* what, char const* list) {
    KSWEEP_REQUIRE(listed == shots * static_cast<std::size_t>(per_shot),
                   "survey lists " << listed << " " << what << " " << list << ", expected n_shots * n_" << what << " = "
                                   << shots * per_shot);
  };
  if (survey.source_points.empty()) check_count(survey.sources.size(), survey.n_sources, "sources", "cells");
  else check_count(survey.source_points.size(), survey.n_sources, "sources", "points");
  if (survey.receiver_points.empty()) check_count(survey.receivers.size(), survey.n_receivers, "receivers", "cells");
  else check_count(survey.receiver_points.size(), survey.n_receivers, "receivers", "points");
  if (!survey.receiver_count.empty()) {
    KSWEEP_REQUIRE(survey.receiver_count.size() == shots,
                   "survey lists receiver counts of " << survey.receiver_count.size() << " shots, expected " << shots);
    for (std::size_t s = 0; s < shots; ++s)
      KSWEEP_REQUIRE(survey.receiver_count[s] >= 0 && survey.receiver_count[s] <= survey.n_receivers,
                     "shot " << s << " has " << survey.receiver_count[s] << " receivers in use: it must be in [0, "
                             << survey.n_receivers << "]");
  }
  bool const three = grid.dim() == 3;
  int const ny = three ? grid.ny : 1;
  auto describe = [&](Point const& p) { return position(p, grid); };
  auto check = [&](Point const& p, char const* what, std::size_t k, int per_shot) {
    std::size_t const s = k / per_shot, i = k % per_shot;
    bool const finite = std::isfinite(p.z) && std::isfinite(p.x) && std::isfinite(p.y);
    bool const below = pml.free_surface ? p.z > 0 : p.z >= 0;
    bool const inside = finite && below && p.z <= grid.nz - 1 && p.x >= 0 && p.x <= grid.nx - 1 && p.y >= 0 &&
                        p.y <= ny - 1 && (three || p.y == 0);
    KSWEEP_REQUIRE(
        inside, what << " " << i << " of shot " << s << " at " << describe(p)
                     << " is outside the model grid: z must be in " << (pml.free_surface ? "(0, " : "[0, ")
                     << grid.nz - 1 << "]" << (three ? ", y in [0, " + std::to_string(ny - 1) + "]" : "")
                     << " and x in [0, " << grid.nx - 1 << "] cells"
                     << (!three && p.y != 0 ? " (y must be 0 on a 2D grid)" : "")
                     << (pml.free_surface && p.z == 0 ? " (z = 0 is the free surface, where pressure is zero)" : ""));
  };
  for (std::size_t k = 0; k < shots * survey.n_sources; ++k)
    if (survey.source_live(int(k / survey.n_sources), int(k % survey.n_sources)))
      check(survey.source_at(k), "source", k, survey.n_sources);
  for (std::size_t k = 0; k < shots * survey.n_receivers; ++k)
    if (survey.live(int(k / survey.n_receivers), int(k % survey.n_receivers)))
      check(survey.receiver_at(k), "receiver", k, survey.n_receivers);
}

void check_survey(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml) {
  check_positions(survey, grid, pml);
  (void)source_taps(survey, grid, pml);  // each refuses taps beyond the absorbing layer
  (void)receiver_taps(survey, grid, pml);
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
