#include <ksweep/fwi/inversion.hpp>

#include "built.hpp"
#include "checks.hpp"
#include "inversion_run.hpp"

#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>

#include <algorithm>
#include <cmath>

namespace ksweep::fwi {

namespace {

constexpr char const* kWho = "ksweep::fwi::Inversion: ";

/// The most correction pairs L-BFGS keeps (each pair is two vectors of the model's size).
constexpr int kLbfgsMaxMemory = 100;

/// The largest density read as kg/m^3 that is surely in g/cm^3 instead (water: 1000 kg/m^3).
constexpr double kDensityUnits = 100.0;

void check_data(std::vector<double> const& wavelet, std::vector<float> const& observed, int nt, int receivers,
                std::string const& who) {
  detail::require_finite(wavelet.data(), wavelet.size(), who + "the wavelet", detail::sample_position);
  detail::require_finite(observed.data(), observed.size(), who + "the observed data", [&](std::size_t i) {
    return receivers > 0 ? detail::record_position(i, nt, receivers) : detail::sample_position(i);
  });
}

void check_density_units(std::vector<float> const& rho, std::string const& what) {
  if (rho.empty()) return;
  double const top = *std::max_element(rho.begin(), rho.end());
  KSWEEP_REQUIRE(top >= kDensityUnits, kWho << what << "'s largest value is " << top
                                            << ", below any rock's in kg/m^3 (water: 1000): is it in g/cm^3? "
                                               "Densities are in kg/m^3 (multiply by 1000)");
}

/// The shapes and values of the problem (finite samples, the arrays' sizes against the grid and
/// the survey, densities in kg/m^3), before anything is allocated.
void check_problem(Problem const& pb) {
  auto const& g = pb.grid;
  auto const cells = static_cast<std::size_t>(g.cells());
  int const shots = pb.survey.n_shots, nr = pb.survey.n_receivers;
  KSWEEP_REQUIRE(pb.nt >= 1, kWho << "nt = " << pb.nt << " must be >= 1");
  KSWEEP_REQUIRE(pb.wavelet.size() == static_cast<std::size_t>(pb.nt),
                 kWho << "a wavelet of " << pb.wavelet.size() << " samples for nt = " << pb.nt);
  KSWEEP_REQUIRE(pb.start.size() == cells,
                 kWho << "a starting model of " << pb.start.size() << " cells for a grid of " << cells);
  KSWEEP_REQUIRE(pb.truth.empty() || pb.truth.size() == cells,
                 kWho << "a true model of " << pb.truth.size() << " cells for a grid of " << cells);
  KSWEEP_REQUIRE(shots >= 1 && pb.survey.n_sources == 1, kWho << "the survey needs >= 1 shot of one source each, not "
                                                              << shots << " shots of " << pb.survey.n_sources);
  auto const samples = static_cast<std::size_t>(shots) * static_cast<std::size_t>(pb.nt) * static_cast<std::size_t>(nr);
  KSWEEP_REQUIRE(pb.observed.size() == samples, kWho << pb.observed.size() << " observed samples, the survey has "
                                                     << samples << " (shots x nt x receivers)");
  check_data(pb.wavelet, pb.observed, pb.nt, nr, kWho);
  detail::require_finite(pb.start.data(), pb.start.size(), std::string(kWho) + "the starting model",
                         detail::cell_position);
  if (pb.physics == Physics::acoustic_vd) {
    KSWEEP_REQUIRE(pb.density.size() == cells,
                   kWho << "a density of " << pb.density.size() << " cells for a grid of " << cells);
    detail::require_finite(pb.density.data(), pb.density.size(), std::string(kWho) + "the density",
                           detail::cell_position);
    core::check_density(pb.density.data(), static_cast<long long>(cells));
    KSWEEP_REQUIRE(pb.truth_density.empty() || pb.truth_density.size() == cells,
                   kWho << "a true density of " << pb.truth_density.size() << " cells for a grid of " << cells);
    check_density_units(pb.density, "the density");
    check_density_units(pb.truth_density, "the true density");
  } else {
    KSWEEP_REQUIRE(pb.density.empty() && pb.truth_density.empty(),
                   kWho << "a density given to constant-density acoustics (physics \"acoustic\"); variable density "
                           "is physics \"acoustic_vd\"");
  }
}

/// A state's model (and density) finite and positive, before restore() uploads it.
void check_state(State const& s) {
  for (auto const* v : {&s.model, &s.density}) {
    std::string const what =
        std::string("ksweep::fwi::Inversion::restore: the state's ") + (v == &s.model ? "model" : "density");
    detail::require_finite(v->data(), v->size(), what, detail::cell_position);
    auto const low = std::find_if(v->begin(), v->end(), [](float x) { return !(x > 0); });
    KSWEEP_REQUIRE(low == v->end(),
                   what << " holds " << *low << " at cell " << low - v->begin() << ": every value must be > 0");
  }
  for (auto const* v : {&s.first, &s.second})
    detail::require_finite(v->data(), v->size(), "ksweep::fwi::Inversion::restore: the state's Adam moments",
                           detail::cell_position);
}

}  // namespace

void check_options(Problem const& pb, Options const& opt, OptionNames const& names) {
  auto const key = [&](char const* name) { return names.prefix + name; };
  auto const finite_positive = [](double x) { return std::isfinite(x) && x > 0; };
  auto const& g = pb.grid;
  bool const adam = opt.method == Method::adam;
  if (adam)
    KSWEEP_REQUIRE(
        opt.batch >= 1 && opt.batch <= pb.survey.n_shots,
        key("batch") << " = " << opt.batch << " shots must be in [1, " << pb.survey.n_shots << "], the survey's shots");
  KSWEEP_REQUIRE(opt.water_rows >= 0 && opt.water_rows < g.nz,
                 key("water_rows") << " = " << opt.water_rows << " must be in [0, nz = " << g.nz << ")");
  int const extent = std::max({g.nz, g.ny, g.nx});
  KSWEEP_REQUIRE(std::isfinite(opt.grad_smooth) && opt.grad_smooth >= 0,
                 key("grad_smooth") << " = " << opt.grad_smooth << " cells must be a finite number >= 0");
  KSWEEP_REQUIRE(opt.grad_smooth <= extent,
                 key("grad_smooth") << " = " << opt.grad_smooth << " cells is wider than the model's largest extent, "
                                    << extent << " cells: a Gaussian that wide smooths the gradient to a constant; "
                                    << "use at most " << extent);
  // L-BFGS's line search compares the loss with the gradient's slope: the gradient must be the
  // loss's own.
  KSWEEP_REQUIRE(adam || (opt.grad_smooth == 0 && !opt.precondition),
                 key("optimizer") << " = \"lbfgs\" needs the gradient of the loss as it is (its line search checks "
                                     "the loss against the gradient's slope), but "
                                  << key("grad_smooth") << " = " << opt.grad_smooth << " and " << key("precondition")
                                  << " = " << (opt.precondition ? "true" : "false") << " change it; set "
                                  << key("grad_smooth") << " = 0 and " << key("precondition") << " = false, or use "
                                  << key("optimizer") << " = \"adam\"");
  KSWEEP_REQUIRE(finite_positive(opt.vmin) && std::isfinite(opt.vmax) && opt.vmax >= opt.vmin,
                 "the bounds " << key("vmin") << " = " << opt.vmin << " and " << key("vmax") << " = " << opt.vmax
                               << " m/s must be finite, 0 < vmin <= vmax");
  if (adam) {
    auto const& a = opt.adam;
    KSWEEP_REQUIRE(finite_positive(a.lr), key("lr") << " = " << a.lr << " must be a finite step > 0 (m/s)");
    KSWEEP_REQUIRE(a.beta1 >= 0 && a.beta1 < 1, key("beta1") << " = " << a.beta1 << " must be in [0, 1)");
    KSWEEP_REQUIRE(a.beta2 >= 0 && a.beta2 < 1, key("beta2") << " = " << a.beta2 << " must be in [0, 1)");
    KSWEEP_REQUIRE(finite_positive(a.eps), key("eps") << " = " << a.eps << " must be a finite number > 0");
    KSWEEP_REQUIRE(std::isfinite(opt.lr_rho) && opt.lr_rho >= 0,
                   key("lr_rho") << " = " << opt.lr_rho << " must be finite and >= 0 (0: lr)");
  } else {
    auto const& l = opt.lbfgs;
    KSWEEP_REQUIRE(l.memory >= 1 && l.memory <= kLbfgsMaxMemory,
                   key("lbfgs_memory") << " = " << l.memory << " correction pairs must be in [1, " << kLbfgsMaxMemory
                                       << "] (each pair holds two vectors of the model's size)");
    KSWEEP_REQUIRE(finite_positive(l.first_step),
                   key("lr") << " = " << l.first_step << " (L-BFGS's first step) must be a finite step > 0 (m/s)");
  }
  // Every velocity the inversion may reach must propagate stably (constant density: the CFL
  // limit of vp alone).
  if (pb.physics == Physics::acoustic && pb.dt > 0 && g.dh > 0) {
    double const limit = core::courant_limit(pb.order, g.dim()), h = core::cfl_spacing(g);
    double const stable = limit * h / pb.dt;
    KSWEEP_REQUIRE(opt.vmax * pb.dt / h <= limit * (1 + 1e-12),  // vmax = 0 gave the limit itself
                   key("vmax") << " = " << opt.vmax << " m/s lets the model reach velocities that " << names.dt << " = "
                               << pb.dt << " s cannot propagate stably: the CFL limit " << limit << " of order "
                               << pb.order << " at " << g.describe_spacing() << " allows at most " << stable
                               << " m/s; lower " << key("vmax") << " to at most " << stable << " m/s or " << names.dt
                               << " to at most " << limit * h / opt.vmax << " s");
  }
  KSWEEP_REQUIRE(!opt.invert.empty(), key("invert") << " is empty: no parameter to invert");
  for (std::size_t i = 0; i < opt.invert.size(); ++i) {
    parameter_index(pb.physics, opt.invert[i]);  // names the unknown one
    for (std::size_t j = 0; j < i; ++j)
      KSWEEP_REQUIRE(opt.invert[j] != opt.invert[i], key("invert")
                                                         << " names parameter \"" << opt.invert[i] << "\" twice");
  }
  bool const rho = std::find(opt.invert.begin(), opt.invert.end(), "rho") != opt.invert.end();
  KSWEEP_REQUIRE(!rho || (finite_positive(opt.rho_min) && std::isfinite(opt.rho_max) && opt.rho_max >= opt.rho_min),
                 "the density bounds " << key("rho_min") << " = " << opt.rho_min << " and " << key("rho_max") << " = "
                                       << opt.rho_max << " kg/m^3 must be finite, 0 < rho_min <= rho_max");
}

void check_bounds(Problem const& pb, Options const& opt, std::vector<float> const& vp, std::vector<float> const& rho,
                  std::string const& what, OptionNames const& names) {
  auto const key = [&](char const* name) { return names.prefix + name; };
  auto const& g = pb.grid;
  auto const fixed = static_cast<std::size_t>(opt.water_rows) * static_cast<std::size_t>(g.cells() / g.nz);
  auto const outside = [&](std::vector<float> const& v, double lo, double hi, char const* quantity, char const* low,
                           char const* high, char const* units) {
    if (fixed >= v.size()) return;
    auto const [a, b] = std::minmax_element(v.begin() + static_cast<std::ptrdiff_t>(fixed), v.end());
    KSWEEP_REQUIRE(*a >= lo && *b <= hi,
                   what << " has " << quantity << " in [" << *a << ", " << *b << "] " << units
                        << " outside the water rows, outside the bounds the inversion keeps, [" << key(low) << ", "
                        << key(high) << "] = [" << lo << ", " << hi << "] " << units
                        << "; every cell outside would be clipped at the first step: widen the bounds to cover "
                        << "the model, or check its values (units: " << units << ")");
  };
  outside(vp, opt.vmin, opt.vmax, "velocities", "vmin", "vmax", "m/s");
  if (std::find(opt.invert.begin(), opt.invert.end(), "rho") != opt.invert.end())
    outside(rho, opt.rho_min, opt.rho_max, "densities", "rho_min", "rho_max", "kg/m^3");
}

std::size_t optimizer_vectors(Options const& o) {
  return o.method == Method::lbfgs ? Lbfgs<float>::device_vectors(o.lbfgs.memory) : Adam<float>::device_vectors();
}

Inversion::Inversion(Problem problem, Options options, comm::Communicator const& comm) {
  // vmax = 0, constant density: the largest velocity dt propagates stably (as fwi.vmax = 0).
  if (options.vmax == 0 && problem.physics == Physics::acoustic && problem.dt > 0 && problem.grid.dh > 0)
    options.vmax =
        core::courant_limit(problem.order, problem.grid.dim()) * core::cfl_spacing(problem.grid) / problem.dt;
  check_problem(problem);
  try {
    check_options(problem, options);
    check_bounds(problem, options, problem.start, problem.density, "the starting model");
  } catch (Error const& e) {
    throw Error(kWho + std::string(e.what()));
  }
  int const dim = problem.grid.dim();
  m_impl = core::dispatch_order(problem.order, [&](auto o) {
    constexpr int order = decltype(o)::value;
    auto make = [&](auto d, auto physics) {
      constexpr int D = decltype(d)::value;
      using P = typename decltype(physics)::type;
      return detail::make_if_built<order, D, P>(
          [&] { return make_inversion<order, D, P>(std::move(problem), std::move(options), comm); });
    };
    using Two = std::integral_constant<int, 2>;
    using Three = std::integral_constant<int, 3>;
    if (problem.physics == Physics::acoustic_vd)
      return dim == 3 ? make(Three{}, detail::tag<core::AcousticVd>{}) : make(Two{}, detail::tag<core::AcousticVd>{});
    return dim == 3 ? make(Three{}, detail::tag<core::Acoustic>{}) : make(Two{}, detail::tag<core::Acoustic>{});
  });
}

Inversion::~Inversion() = default;

void Inversion::restore(State const& s) {
  check_state(s);
  m_impl->restore(s);
}
void Inversion::set_data(std::vector<double> wavelet, std::vector<float> observed) {
  check_data(wavelet, observed, static_cast<int>(wavelet.size()), 0, "ksweep::fwi::Inversion::set_data: ");
  m_impl->set_data(std::move(wavelet), std::move(observed));
}
void Inversion::restart_optimizer() { m_impl->restart_optimizer(); }
Report Inversion::step() { return m_impl->step(); }
int Inversion::iteration() const { return m_impl->iteration(); }
State Inversion::state() const { return m_impl->state(); }
std::vector<float> Inversion::model() const { return m_impl->model(); }
std::vector<float> Inversion::density() const { return m_impl->density(); }
Images Inversion::images() const { return m_impl->images(); }
double Inversion::rmse() const { return m_impl->rmse(); }
double Inversion::rmse(std::vector<float> const& model) const { return m_impl->rmse(model); }
double Inversion::rmse_density() const { return m_impl->rmse_density(nullptr); }
double Inversion::rmse_density(std::vector<float> const& density) const { return m_impl->rmse_density(&density); }
core::MemoryReport Inversion::memory() const { return m_impl->memory(); }

}  // namespace ksweep::fwi
