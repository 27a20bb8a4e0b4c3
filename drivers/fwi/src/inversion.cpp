#include <ksweep/fwi/inversion.hpp>

#include "built.hpp"
#include "inversion_run.hpp"

#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>

namespace ksweep::fwi {

Inversion::Inversion(Problem problem, Options options, comm::Communicator const& comm) {
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

void Inversion::restore(State const& s) { m_impl->restore(s); }
void Inversion::set_data(std::vector<double> wavelet, std::vector<float> observed) {
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
