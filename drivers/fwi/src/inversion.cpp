#include <ksweep/fwi/inversion.hpp>

#include "inversion_run.hpp"

#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>

namespace ksweep::fwi {

Inversion::Inversion(Problem problem, Options options, comm::Communicator const& comm) {
  int const dim = problem.grid.dim();
  m_impl = core::dispatch_order(problem.order, [&](auto o) {
    constexpr int order = decltype(o)::value;
    if (problem.physics == Physics::acoustic_vd)
      return dim == 3 ? make_inversion<order, 3, core::AcousticVd>(std::move(problem), std::move(options), comm)
                      : make_inversion<order, 2, core::AcousticVd>(std::move(problem), std::move(options), comm);
    return dim == 3 ? make_inversion<order, 3, core::Acoustic>(std::move(problem), std::move(options), comm)
                    : make_inversion<order, 2, core::Acoustic>(std::move(problem), std::move(options), comm);
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
