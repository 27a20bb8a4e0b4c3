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

/// The names of the parameters of `p`, listed for messages: "vp" or "vp, rho".
std::string listed(Physics p) {
  std::string list;
  for (auto const& q : physics_parameters(p)) list += (list.empty() ? "" : ", ") + std::string(q.name);
  return list;
}

/// The fields of a model (`what`: "a starting model") against the physics: one per parameter.
void check_field_count(Physics p, std::size_t fields, std::size_t least, std::string const& what) {
  auto const n = static_cast<std::size_t>(n_parameters(p));
  KSWEEP_REQUIRE(
      fields >= least && fields <= n,
      kWho << what << " of " << fields << " field(s) for physics \"" << to_string(p) << "\", whose " << n
           << " parameter(s) are " << listed(p)
           << (p == Physics::acoustic && fields > n ? " (variable density is physics \"acoustic_vd\")" : ""));
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
  auto const& params = physics_parameters(pb.physics);
  check_field_count(pb.physics, pb.start.size(), params.size(), "a starting model");
  check_field_count(pb.physics, pb.truth.size(), 0, "a true model");
  for (std::size_t p = 0; p < params.size(); ++p) {
    std::string const name = std::string(params[p].name) + " (" + params[p].noun + ")";
    auto const& v = pb.start[p];
    KSWEEP_REQUIRE(v.size() == cells,
                   kWho << "a starting " << name << " of " << v.size() << " cells for a grid of " << cells);
    KSWEEP_REQUIRE(p >= pb.truth.size() || pb.truth[p].empty() || pb.truth[p].size() == cells,
                   kWho << "a true " << name << " of " << pb.truth[p].size() << " cells for a grid of " << cells);
    detail::require_finite(v.data(), v.size(), std::string(kWho) + "the starting " + name, detail::cell_position);
    if (std::string(params[p].name) == "rho") {
      core::check_density(v.data(), static_cast<long long>(cells));
      check_density_units(v, "the starting density");
      if (p < pb.truth.size()) check_density_units(pb.truth[p], "the true density");
    }
  }
  KSWEEP_REQUIRE(shots >= 1 && pb.survey.n_sources == 1, kWho << "the survey needs >= 1 shot of one source each, not "
                                                              << shots << " shots of " << pb.survey.n_sources);
  auto const samples = static_cast<std::size_t>(shots) * static_cast<std::size_t>(pb.nt) * static_cast<std::size_t>(nr);
  KSWEEP_REQUIRE(pb.observed.size() == samples, kWho << pb.observed.size() << " observed samples, the survey has "
                                                     << samples << " (shots x nt x receivers)");
  check_data(pb.wavelet, pb.observed, pb.nt, nr, kWho);
}

/// A state's model finite and positive, before restore() uploads it.
void check_state(State const& s) {
  for (std::size_t p = 0; p < s.model.size(); ++p) {
    auto const& v = s.model[p];
    std::string const what = "ksweep::fwi::Inversion::restore: the state's model (field " + std::to_string(p) + ")";
    detail::require_finite(v.data(), v.size(), what, detail::cell_position);
    auto const low = std::find_if(v.begin(), v.end(), [](float x) { return !(x > 0); });
    KSWEEP_REQUIRE(low == v.end(),
                   what << " holds " << *low << " at cell " << low - v.begin() << ": every value must be > 0");
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
  auto const& params = physics_parameters(pb.physics);
  KSWEEP_REQUIRE(opt.bounds.size() <= params.size(), "bounds for " << opt.bounds.size() << " parameters, physics \""
                                                                   << to_string(pb.physics) << "\" has "
                                                                   << params.size() << ": " << listed(pb.physics));
  // The velocity's bounds always (its max is the stability bound), another parameter's when it
  // is inverted.
  for (std::size_t p = 0; p < params.size(); ++p) {
    auto const& q = params[p];
    bool const inverted = std::find(opt.invert.begin(), opt.invert.end(), q.name) != opt.invert.end();
    if (p > 0 && !inverted) continue;
    Bounds const b = bounds_of(opt, static_cast<int>(p));
    KSWEEP_REQUIRE(finite_positive(b.min) && std::isfinite(b.max) && b.max > b.min,
                   "the bounds " << key(q.min_key) << " = " << b.min << " and " << key(q.max_key) << " = " << b.max
                                 << " " << q.unit << " must be finite, 0 < " << q.min_key << " < " << q.max_key);
    if (adam && p > 0)
      KSWEEP_REQUIRE(std::isfinite(b.lr) && b.lr >= 0, key(q.step_key)
                                                           << " = " << b.lr << " must be finite and >= 0 (0: lr)");
  }
  double const vmax = bounds_of(opt, 0).max;
  if (adam) {
    auto const& a = opt.adam;
    KSWEEP_REQUIRE(finite_positive(a.lr), key("lr") << " = " << a.lr << " must be a finite step > 0 (m/s)");
    KSWEEP_REQUIRE(a.beta1 >= 0 && a.beta1 < 1, key("beta1") << " = " << a.beta1 << " must be in [0, 1)");
    KSWEEP_REQUIRE(a.beta2 >= 0 && a.beta2 < 1, key("beta2") << " = " << a.beta2 << " must be in [0, 1)");
    KSWEEP_REQUIRE(finite_positive(a.eps), key("eps") << " = " << a.eps << " must be a finite number > 0");
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
    KSWEEP_REQUIRE(vmax * pb.dt / h <= limit * (1 + 1e-12),  // vmax = 0 gave the limit itself
                   key("vmax") << " = " << vmax << " m/s lets the model reach velocities that " << names.dt << " = "
                               << pb.dt << " s cannot propagate stably: the CFL limit " << limit << " of order "
                               << pb.order << " at " << g.describe_spacing() << " allows at most " << stable
                               << " m/s; lower " << key("vmax") << " to at most " << stable << " m/s or " << names.dt
                               << " to at most " << limit * h / vmax << " s");
  }
  KSWEEP_REQUIRE(!opt.invert.empty(), key("invert") << " is empty: no parameter to invert");
  for (std::size_t i = 0; i < opt.invert.size(); ++i) {
    parameter_index(pb.physics, opt.invert[i]);  // names the unknown one
    for (std::size_t j = 0; j < i; ++j)
      KSWEEP_REQUIRE(opt.invert[j] != opt.invert[i], key("invert")
                                                         << " names parameter \"" << opt.invert[i] << "\" twice");
  }
}

void check_bounds(Problem const& pb, Options const& opt, Fields const& model, std::string const& what,
                  OptionNames const& names) {
  auto const key = [&](char const* name) { return names.prefix + name; };
  auto const& g = pb.grid;
  auto const fixed = static_cast<std::size_t>(opt.water_rows) * static_cast<std::size_t>(g.cells() / g.nz);
  auto const& params = physics_parameters(pb.physics);
  for (std::size_t p = 0; p < params.size() && p < model.size(); ++p) {
    auto const& q = params[p];
    if (p > 0 && std::find(opt.invert.begin(), opt.invert.end(), q.name) == opt.invert.end()) continue;  // held
    auto const& v = model[p];
    if (fixed >= v.size()) continue;
    Bounds const b = bounds_of(opt, static_cast<int>(p));
    auto const [lo, hi] = std::minmax_element(v.begin() + static_cast<std::ptrdiff_t>(fixed), v.end());
    KSWEEP_REQUIRE(*lo >= b.min && *hi <= b.max,
                   what << " has " << q.plural << " in [" << *lo << ", " << *hi << "] " << q.unit
                        << " outside the water rows, outside the bounds the inversion keeps, [" << key(q.min_key)
                        << ", " << key(q.max_key) << "] = [" << b.min << ", " << b.max << "] " << q.unit
                        << "; every cell outside would be clipped at the first step: widen the bounds to cover "
                        << "the model, or check its values (units: " << q.unit << ")");
  }
}

std::size_t optimizer_vectors(Options const& o) {
  return o.method == Method::lbfgs ? Lbfgs<float>::device_vectors(o.lbfgs.memory) : Adam<float>::device_vectors();
}

Inversion::Inversion(Problem problem, Options options, comm::Communicator const& comm) {
  // vmax = 0, constant density: the largest velocity dt propagates stably (as fwi.vmax = 0).
  if (bounds_of(options, 0).max == 0 && problem.physics == Physics::acoustic && problem.dt > 0 && problem.grid.dh > 0) {
    if (options.bounds.empty()) options.bounds.resize(1);
    options.bounds[0].max =
        core::courant_limit(problem.order, problem.grid.dim()) * core::cfl_spacing(problem.grid) / problem.dt;
  }
  check_problem(problem);
  try {
    check_options(problem, options);
    check_bounds(problem, options, problem.start, "the starting model");
  } catch (Error const& e) {
    throw Error(kWho + std::string(e.what()));
  }
  m_impl = detail::dispatch(problem.physics, problem.order, problem.grid.dim(), [&](auto o, auto d, auto physics) {
    using P = typename decltype(physics)::type;
    return make_inversion<decltype(o)::value, decltype(d)::value, P>(std::move(problem), std::move(options), comm);
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
Fields Inversion::model() const { return m_impl->model(); }
Images Inversion::images() const { return m_impl->images(); }
void Inversion::set_illuminations(bool on) { m_impl->set_illuminations(on); }
std::vector<double> Inversion::rmse() const { return m_impl->rmse(nullptr); }
std::vector<double> Inversion::rmse(Fields const& model) const { return m_impl->rmse(&model); }
core::MemoryReport Inversion::memory() const { return m_impl->memory(); }

}  // namespace ksweep::fwi
