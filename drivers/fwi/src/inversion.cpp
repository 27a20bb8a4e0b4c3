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

/// The checks of values (finite samples, the optimizers' parameters, stability of the bounds)
/// every caller gets, before anything is allocated; the shapes are checked by the inversion.
void check_values(Problem const& pb, Options const& opt) {
  check_data(pb.wavelet, pb.observed, pb.nt, pb.survey.n_receivers, kWho);
  detail::require_finite(pb.start.data(), pb.start.size(), std::string(kWho) + "the starting model",
                         detail::cell_position);
  auto const finite_positive = [](double x) { return std::isfinite(x) && x > 0; };
  KSWEEP_REQUIRE(finite_positive(opt.vmin) && std::isfinite(opt.vmax), kWho << "the bounds vmin = " << opt.vmin
                                                                            << " and vmax = " << opt.vmax
                                                                            << " m/s must be finite, vmin > 0");
  if (opt.method == Method::adam) {
    auto const& a = opt.adam;
    KSWEEP_REQUIRE(finite_positive(a.lr), kWho << "lr = " << a.lr << " must be a finite step > 0 (m/s)");
    KSWEEP_REQUIRE(a.beta1 >= 0 && a.beta1 < 1, kWho << "beta1 = " << a.beta1 << " must be in [0, 1)");
    KSWEEP_REQUIRE(a.beta2 >= 0 && a.beta2 < 1, kWho << "beta2 = " << a.beta2 << " must be in [0, 1)");
    KSWEEP_REQUIRE(finite_positive(a.eps), kWho << "eps = " << a.eps << " must be a finite number > 0");
    KSWEEP_REQUIRE(std::isfinite(opt.lr_rho) && opt.lr_rho >= 0,
                   kWho << "lr_rho = " << opt.lr_rho << " must be finite and >= 0 (0: lr)");
  } else {
    auto const& l = opt.lbfgs;
    KSWEEP_REQUIRE(l.memory >= 1 && l.memory <= kLbfgsMaxMemory,
                   kWho << "lbfgs_memory = " << l.memory << " correction pairs must be in [1, " << kLbfgsMaxMemory
                        << "] (each pair holds two vectors of the model's size)");
    KSWEEP_REQUIRE(finite_positive(l.first_step),
                   kWho << "lr = " << l.first_step << " (L-BFGS's first step) must be a finite step > 0 (m/s)");
  }
  // Every velocity the inversion may reach must propagate stably (constant density: the CFL
  // limit of vp alone).
  if (pb.physics == Physics::acoustic && pb.dt > 0 && pb.grid.dh > 0) {
    double const limit = core::courant_limit(pb.order, pb.grid.dim());
    KSWEEP_REQUIRE(opt.vmax * pb.dt / pb.grid.dh <= limit * (1 + 1e-12),  // vmax = 0 gave the limit itself
                   kWho << "vmax = " << opt.vmax << " m/s lets the model reach velocities that dt = " << pb.dt
                        << " s cannot propagate stably: vmax dt / dh = " << opt.vmax * pb.dt / pb.grid.dh
                        << " exceeds the CFL limit " << limit << " of order " << pb.order << "; lower vmax to at most "
                        << limit * pb.grid.dh / pb.dt << " m/s or dt");
  }
  if (pb.physics == Physics::acoustic_vd) {
    detail::require_finite(pb.density.data(), pb.density.size(), std::string(kWho) + "the density",
                           detail::cell_position);
    check_density_units(pb.density, "the density");
    check_density_units(pb.truth_density, "the true density");
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

Inversion::Inversion(Problem problem, Options options, comm::Communicator const& comm) {
  // vmax = 0, constant density: the largest velocity dt propagates stably (as fwi.vmax = 0).
  if (options.vmax == 0 && problem.physics == Physics::acoustic && problem.dt > 0 && problem.grid.dh > 0)
    options.vmax = core::courant_limit(problem.order, problem.grid.dim()) * problem.grid.dh / problem.dt;
  check_values(problem, options);
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
