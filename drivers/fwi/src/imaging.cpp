#include <ksweep/fwi/imaging.hpp>

#include <ksweep/base/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

namespace ksweep::fwi {

namespace {

template <class Real>
struct Sizes {
  std::size_t cells = 0, records = 0;
  explicit Sizes(Modeling<Real> const& m) {
    auto const& s = m.setup();
    cells = static_cast<std::size_t>(s.grid.cells());
    records = static_cast<std::size_t>(s.survey.n_shots) * static_cast<std::size_t>(s.nt) *
              static_cast<std::size_t>(s.survey.n_receivers);
  }
};

double dot(std::vector<double> const& a, std::vector<double> const& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

template <class Real>
std::vector<Real> to_real(std::vector<double> const& v) {
  return std::vector<Real>(v.begin(), v.end());
}

// The reflected data: the data less the background's records, as chosen.
template <class Real>
std::vector<double> reflected(Modeling<Real>& m, Real const* wavelets, Real const* data, bool subtract) {
  Sizes<Real> const n(m);
  std::vector<double> d(data, data + n.records);
  if (subtract) {
    std::vector<Real> background(n.records);
    m.forward(wavelets, background.data());
    for (std::size_t i = 0; i < n.records; ++i) d[i] -= static_cast<double>(background[i]);
  }
  return d;
}

// J^T r (and, when asked, the source illumination and the zero-lag cross-correlation of the
// source and adjoint wavefields, from the same backward pass).
template <class Real>
std::vector<double> transpose(Modeling<Real>& m, Real const* wavelets, std::vector<double> const& r,
                              std::vector<double>* illumination = nullptr, std::vector<double>* cross = nullptr) {
  Sizes<Real> const n(m);
  std::vector<double> g(n.cells);
  ModelingImages out;
  out.grad = {g.data()};
  if (illumination) {
    illumination->assign(n.cells, 0.0);
    out.illum_src = illumination->data();
  }
  if (cross) {
    cross->assign(n.cells, 0.0);
    out.illum_rec = cross->data();
  }
  auto const rr = to_real<Real>(r);
  // The receiver image is the cross-correlation for this call alone.
  struct Restore {
    Modeling<Real>& m;
    ~Restore() { m.set_cross_correlation(false); }
  } const restore{m};
  m.set_cross_correlation(cross != nullptr);
  m.vjp(wavelets, rr.data(), out);
  return g;
}

// J p.
template <class Real>
std::vector<double> born(Modeling<Real>& m, Real const* wavelets, std::vector<double> const& p) {
  Sizes<Real> const n(m);
  auto const pr = to_real<Real>(p);
  std::vector<Real> q(n.records);
  m.born(wavelets, pr.data(), q.data());
  return std::vector<double>(q.begin(), q.end());
}

// A mask is empty or holds a finite weight per cell.
void check_mask(std::vector<double> const& mask, std::size_t cells, char const* what) {
  if (mask.empty()) return;
  KSWEEP_REQUIRE(mask.size() == cells, what << ": the mask has " << mask.size() << " cells, the model " << cells);
  for (std::size_t i = 0; i < cells; ++i)
    KSWEEP_REQUIRE(std::isfinite(mask[i]),
                   what << ": the mask at cell " << i << " is " << mask[i] << ": every weight must be a finite number");
}

}  // namespace

ImageCondition parse_image_condition(std::string const& name) {
  if (name == "born") return ImageCondition::born;
  if (name == "cross-correlation") return ImageCondition::cross_correlation;
  // The configuration's words (imaging.condition), without its section.
  KSWEEP_REQUIRE(false, "condition = \"" << name << "\" is not allowed (allowed: born, cross-correlation)");
  return ImageCondition::born;
}

std::vector<double> laplacian_filter(std::vector<double> const& image, core::ModelGrid const& grid) {
  int const nz = grid.nz, ny = grid.dim() == 3 ? grid.ny : 1, nx = grid.nx;
  KSWEEP_REQUIRE(image.size() == static_cast<std::size_t>(grid.cells()),
                 "laplacian_filter: the image has " << image.size() << " cells, the grid " << grid.cells());
  std::vector<double> out(image.size());
  auto at = [&](int z, int y, int x) -> double {
    if (z < 0 || z >= nz || y < 0 || y >= ny || x < 0 || x >= nx) return 0.0;
    return image[(static_cast<std::size_t>(z) * ny + y) * nx + x];
  };
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        double const c = at(z, y, x);
        double s = 4 * c - at(z - 1, y, x) - at(z + 1, y, x) - at(z, y, x - 1) - at(z, y, x + 1);
        if (ny > 1) s += 2 * c - at(z, y - 1, x) - at(z, y + 1, x);
        out[(static_cast<std::size_t>(z) * ny + y) * nx + x] = s;
      }
  return out;
}

double correlation(std::vector<double> const& a, std::vector<double> const& b) {
  KSWEEP_REQUIRE(a.size() == b.size() && !a.empty(),
                 "correlation: images of " << a.size() << " and " << b.size() << " cells");
  double ma = 0, mb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= static_cast<double>(a.size());
  mb /= static_cast<double>(b.size());
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += (a[i] - ma) * (b[i] - mb);
    aa += (a[i] - ma) * (a[i] - ma);
    bb += (b[i] - mb) * (b[i] - mb);
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

namespace {

// What RTM and LSRTM start from: the reflected data d, J^T d, the source illumination and, for
// RTM's cross-correlation condition, sum u lambda.
struct Start {
  std::vector<double> data, correlation, illumination, cross;
};

template <class Real>
Start start(Modeling<Real>& m, Real const* wavelets, Real const* data, bool subtract_background, bool cross) {
  Start s;
  s.data = reflected(m, wavelets, data, subtract_background);
  s.correlation = transpose(m, wavelets, s.data, &s.illumination, cross ? &s.cross : nullptr);
  return s;
}

bool cross(RtmOptions const& o) { return o.condition == ImageCondition::cross_correlation; }

void check_stabilization(double stabilization, char const* what) {
  KSWEEP_REQUIRE(
      std::isfinite(stabilization) && stabilization > 0,
      what << ": the stabilization = " << stabilization << " must be > 0 (a fraction of the largest illumination)");
}

void check_inputs(void const* wavelets, void const* data, char const* what) {
  KSWEEP_REQUIRE(wavelets && data, what << ": no " << (wavelets ? "data" : "wavelets (source amplitudes)") << " given");
}

RtmImage rtm_of(Start const& s, core::ModelGrid const& grid, RtmOptions const& options) {
  RtmImage r;
  r.correlation = cross(options) ? s.cross : s.correlation;
  r.illumination = s.illumination;
  auto mute = [&](std::vector<double>& v) {
    for (std::size_t i = 0; i < options.mask.size(); ++i) v[i] *= options.mask[i];
  };
  r.image = r.correlation;
  if (options.normalize) {
    double const eps = options.stabilization * *std::max_element(r.illumination.begin(), r.illumination.end());
    for (std::size_t i = 0; i < r.image.size(); ++i) r.image[i] /= r.illumination[i] + eps;
  }
  mute(r.image);
  if (options.laplacian) {
    r.image = laplacian_filter(r.image, grid);
    mute(r.image);
  }
  return r;
}

// CGLS on J P (m = P y, P the preconditioner times the mask): r = d - J P y, s = P J^T r.
template <class Real>
LsrtmResult lsrtm_from(Modeling<Real>& m, Real const* wavelets, Start const& start, LsrtmOptions const& options,
                       std::function<void(int, double)> const& after_iteration) {
  Sizes<Real> const n(m);
  LsrtmResult out;
  std::vector<double> r = start.data;  // y = 0
  double const dnorm = std::sqrt(dot(r, r));
  KSWEEP_REQUIRE(dnorm > 0, "lsrtm: the reflected data are zero: nothing to image");
  auto const& illumination = start.illumination;
  std::vector<double> s = start.correlation;
  std::vector<double> precond(n.cells, 1.0);
  if (options.precondition) {
    double const eps = options.stabilization * *std::max_element(illumination.begin(), illumination.end());
    for (std::size_t i = 0; i < n.cells; ++i) precond[i] = 1.0 / (illumination[i] + eps);
  }
  for (std::size_t i = 0; i < options.mask.size(); ++i) precond[i] *= options.mask[i];
  auto apply = [&](std::vector<double>& v) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] *= precond[i];
  };
  apply(s);
  std::vector<double> y(n.cells, 0.0), p = s, pp(n.cells);
  double gamma = dot(s, s);
  for (int it = 1; it <= options.iterations; ++it) {
    if (gamma > 0) {  // else y solves the normal equations already
      for (std::size_t i = 0; i < n.cells; ++i) pp[i] = precond[i] * p[i];
      auto const q = born(m, wavelets, pp);
      double const qq = dot(q, q);
      double const alpha = qq > 0 ? gamma / qq : 0.0;
      for (std::size_t i = 0; i < n.cells; ++i) y[i] += alpha * p[i];
      for (std::size_t i = 0; i < r.size(); ++i) r[i] -= alpha * q[i];
    }
    out.misfit.push_back(std::sqrt(dot(r, r)) / dnorm);
    if (after_iteration) after_iteration(it, out.misfit.back());
    if (it == options.iterations || gamma == 0) continue;
    s = transpose(m, wavelets, r);
    apply(s);
    double const next = dot(s, s);
    double const beta = next / gamma;
    for (std::size_t i = 0; i < n.cells; ++i) p[i] = s[i] + beta * p[i];
    gamma = next;
  }
  out.image = y;
  apply(out.image);
  return out;
}

void check_lsrtm_options(LsrtmOptions const& options, std::size_t cells) {
  KSWEEP_REQUIRE(options.iterations >= 1, "lsrtm: iterations = " << options.iterations << " must be >= 1");
  check_stabilization(options.stabilization, "lsrtm");
  check_mask(options.mask, cells, "lsrtm");
}

}  // namespace

template <class Real>
RtmImage rtm(Modeling<Real>& m, Real const* wavelets, Real const* data, RtmOptions const& options) {
  check_inputs(wavelets, data, "rtm");
  check_stabilization(options.stabilization, "rtm");
  check_mask(options.mask, Sizes<Real>(m).cells, "rtm");
  return rtm_of(start(m, wavelets, data, options.subtract_background, cross(options)), m.setup().grid, options);
}

template <class Real>
LsrtmResult lsrtm(Modeling<Real>& m, Real const* wavelets, Real const* data, LsrtmOptions const& options,
                  std::function<void(int, double)> const& after_iteration) {
  check_inputs(wavelets, data, "lsrtm");
  check_lsrtm_options(options, Sizes<Real>(m).cells);
  return lsrtm_from(m, wavelets, start(m, wavelets, data, options.subtract_background, false), options,
                    after_iteration);
}

template <class Real>
std::pair<RtmImage, LsrtmResult> rtm_and_lsrtm(Modeling<Real>& m, Real const* wavelets, Real const* data,
                                               RtmOptions const& rtm_options, LsrtmOptions const& lsrtm_options,
                                               std::function<void(int, double)> const& after_iteration) {
  check_inputs(wavelets, data, "rtm_and_lsrtm");
  KSWEEP_REQUIRE(rtm_options.subtract_background == lsrtm_options.subtract_background,
                 "rtm_and_lsrtm: subtract_background is " << (rtm_options.subtract_background ? "true" : "false")
                                                          << " for RTM and "
                                                          << (lsrtm_options.subtract_background ? "true" : "false")
                                                          << " for LSRTM: they image the same reflected data");
  check_stabilization(rtm_options.stabilization, "rtm");
  check_mask(rtm_options.mask, Sizes<Real>(m).cells, "rtm");
  check_lsrtm_options(lsrtm_options, Sizes<Real>(m).cells);
  Start const s = start(m, wavelets, data, rtm_options.subtract_background, cross(rtm_options));
  return {rtm_of(s, m.setup().grid, rtm_options), lsrtm_from(m, wavelets, s, lsrtm_options, after_iteration)};
}

template RtmImage rtm<float>(Modeling<float>&, float const*, float const*, RtmOptions const&);
template RtmImage rtm<double>(Modeling<double>&, double const*, double const*, RtmOptions const&);
template LsrtmResult lsrtm<float>(Modeling<float>&, float const*, float const*, LsrtmOptions const&,
                                  std::function<void(int, double)> const&);
template LsrtmResult lsrtm<double>(Modeling<double>&, double const*, double const*, LsrtmOptions const&,
                                   std::function<void(int, double)> const&);
template std::pair<RtmImage, LsrtmResult> rtm_and_lsrtm<float>(Modeling<float>&, float const*, float const*,
                                                               RtmOptions const&, LsrtmOptions const&,
                                                               std::function<void(int, double)> const&);
template std::pair<RtmImage, LsrtmResult> rtm_and_lsrtm<double>(Modeling<double>&, double const*, double const*,
                                                                RtmOptions const&, LsrtmOptions const&,
                                                                std::function<void(int, double)> const&);

}  // namespace ksweep::fwi
