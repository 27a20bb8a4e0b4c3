#include <ksweep/fwi/modeling.hpp>

#include "built.hpp"
#include "checks.hpp"
#include "modeling_run.hpp"

#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace ksweep::fwi {

template <class Real>
Modeling<Real>::Modeling(ModelingSetup setup) {
  auto const physics = setup.physics;
  int const order = setup.order, dim = setup.grid.dim();
  m_impl = detail::dispatch(physics, order, dim, [&](auto o, auto d, auto tag) {
    using P = typename decltype(tag)::type;
    return make_modeling<Real, decltype(o)::value, decltype(d)::value, P>(std::move(setup));
  });
}

template <class Real>
Modeling<Real>::~Modeling() = default;

template <class Real>
ModelingSetup const& Modeling<Real>::setup() const {
  return m_impl->setup;
}

template <class Real>
long long Modeling<Real>::cells() const {
  return m_impl->setup.grid.cells();
}

template <class Real>
void Modeling<Real>::set_model(std::vector<Real const*> const& fields, std::vector<Real const*> const& layer) {
  m_impl->set_model(fields, layer);
}

template <class Real>
void Modeling<Real>::set_velocity(Real const* vp, Real const* layer) {
  if (layer) set_model({vp}, {layer});
  else set_model({vp});
}

namespace {

/// Every sample of the wavelets [shot][source][nt] finite (on the device for device arrays).
template <class Real>
void check_wavelets(typename Modeling<Real>::Impl const& m, Real const* w, char const* what) {
  auto const& s = m.setup;
  auto const n = static_cast<std::size_t>(s.survey.n_shots) * static_cast<std::size_t>(s.survey.n_sources) *
                 static_cast<std::size_t>(s.nt);
  detail::require_finite(m.arrays == Arrays::device, w, n, what,
                         [&](std::size_t i) { return detail::wavelet_position(i, s.nt, s.survey.n_sources); });
}

/// Every sample of the records [shot][nt][receiver] finite (on the device for device arrays).
template <class Real>
void check_records(typename Modeling<Real>::Impl const& m, Real const* r, char const* what) {
  auto const& s = m.setup;
  auto const n = static_cast<std::size_t>(s.survey.n_shots) * static_cast<std::size_t>(s.nt) *
                 static_cast<std::size_t>(s.survey.n_receivers);
  detail::require_finite(m.arrays == Arrays::device, r, n, what,
                         [&](std::size_t i) { return detail::record_position(i, s.nt, s.survey.n_receivers); });
}

/// A call's state arrays (ForwardState, EndGradient, VjpExtras' start gradient) where the
/// propagator reads and writes them, which is through host memory: host arrays themselves, and
/// for device arrays in memory the host cannot read (a CUDA build's) host copies (inputs copied
/// in as they are staged, outputs copied back by done()), as Kokkos::create_mirror_view does. On
/// host backends a device array is host memory and is used as it is (staging it there would be
/// two more copies of the 8-shot Marmousi end state, 19 MB, into fresh buffers whose first touch
/// alone costs about 1.2 ms per MB on a VM). The device check runs the state tests
/// (tests/tst_state.cpp) on a CUDA build, where the staging runs.
template <class Real>
class StagedState {
 public:
  StagedState(typename Modeling<Real>::Impl const& m, std::size_t cells, std::size_t memory)
      : m_copy(m.arrays == Arrays::device && !host_accessible),
        m_shots(static_cast<std::size_t>(m.setup.survey.n_shots)),
        m_cells(cells),
        m_memory(memory) {}
  /// A wavefield (`memory` false: [shot][padded cell]) or the layer memories ([shot][value]).
  Real const* in(Real const* p, bool memory = false) {
    if (!p || !m_copy) return p;
    auto const h = buffer(memory);
    Kokkos::deep_copy(h, device_view<Real const>(p, h.extent(0)));
    return h.data();
  }
  Real* out(Real* p, bool memory = false) {
    if (!p || !m_copy) return p;
    auto const h = buffer(memory);
    m_outputs.emplace_back(p, h);
    return h.data();
  }
  ForwardState<Real> state(ForwardState<Real> const& s) {
    return {in(s.start_now), in(s.start_before), in(s.start_memory, true),
            out(s.end_now),  out(s.end_before),  out(s.end_memory, true)};
  }
  EndGradient<Real> end(EndGradient<Real> const& e) { return {in(e.now), in(e.before), in(e.memory, true)}; }
  /// The outputs staged copied to their device arrays.
  void done() {
    for (auto const& [p, h] : m_outputs) Kokkos::deep_copy(device_view<Real>(p, h.extent(0)), h);
    Kokkos::fence();
  }

 private:
  using host_view = Kokkos::View<Real*, Kokkos::HostSpace>;
  static constexpr bool host_accessible =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
  template <class T>
  using device_view = Kokkos::View<T*, Kokkos::DefaultExecutionSpace::memory_space, Kokkos::MemoryUnmanaged>;
  host_view buffer(bool memory) {  // not initialised: written whole before it is read
    return m_buffers.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, "ksweep::fwi::staged_state"),
                                  m_shots * (memory ? m_memory : m_cells));
  }
  bool m_copy;
  std::size_t m_shots, m_cells, m_memory;
  std::vector<host_view> m_buffers;
  std::vector<std::pair<Real*, host_view>> m_outputs;
};

/// StagedState of a call of `m` (`impl` its Impl).
template <class Real>
StagedState<Real> staged_state(Modeling<Real> const& m, typename Modeling<Real>::Impl const& impl) {
  auto const n = m.padded_shape();
  return {impl, static_cast<std::size_t>(n[0]) * n[1] * n[2], static_cast<std::size_t>(m.memory_values())};
}

/// Every value of a state's parts given (u^n, u^{n-1}, the layer memories; each may be null)
/// finite: errors name `who`, the part (`what`), the shot and the padded cell or the value.
template <class Real>
void require_finite_state(std::array<Real const*, 3> const& parts, std::size_t shots, std::size_t cells,
                          std::size_t memory, std::string const& who, std::array<char const*, 3> const& what) {
  auto const at = [cells](std::size_t i) {
    return "shot " + std::to_string(i / cells) + ", padded cell " + std::to_string(i % cells);
  };
  for (int k = 0; k < 2; ++k)
    if (parts[k]) detail::require_finite(parts[k], shots * cells, who + what[k], at);
  if (parts[2]) detail::require_finite(parts[2], shots * memory, who + what[2], detail::sample_position);
}

}  // namespace

template <class Real>
void Modeling<Real>::forward(Real const* wavelets, Real* records) {
  check_wavelets<Real>(*m_impl, wavelets, "ksweep::fwi::Modeling::forward: the source amplitudes");
  m_impl->forward(wavelets, records, ForwardState<Real>{});
}

template <class Real>
void Modeling<Real>::forward(Real const* wavelets, Real* records, ForwardState<Real> const& state) {
  auto staged = staged_state(*this, *m_impl);
  auto const s = staged.state(state);
  check_wavelets<Real>(*m_impl, wavelets, "ksweep::fwi::Modeling::forward: the source amplitudes");
  check_start(s, "ksweep::fwi::Modeling::forward");
  m_impl->forward(wavelets, records, s);
  staged.done();
}

template <class Real>
void Modeling<Real>::check_start(ForwardState<Real> const& state, char const* who) const {
  auto const n = padded_shape();
  require_finite_state<Real>({state.start_now, state.start_before, state.start_memory},
                             static_cast<std::size_t>(m_impl->setup.survey.n_shots),
                             static_cast<std::size_t>(n[0]) * n[1] * n[2], static_cast<std::size_t>(memory_values()),
                             who, {": the wavefield u^0", ": the wavefield u^-1", ": the layer memories"});
}

template <class Real>
void Modeling<Real>::check_end(EndGradient<Real> const& end, char const* who) const {
  if (end.empty()) return;
  KSWEEP_REQUIRE(!m_impl->setup.domains.split(),
                 who << ": a gradient with respect to the end state on a model split into domains "
                        "(parallel.domains) is not supported; run it on whole-model ranks");
  auto const n = padded_shape();
  require_finite_state<Real>({end.now, end.before, end.memory}, static_cast<std::size_t>(m_impl->setup.survey.n_shots),
                             static_cast<std::size_t>(n[0]) * n[1] * n[2], static_cast<std::size_t>(memory_values()),
                             who,
                             {": the gradient with respect to u^nt", ": the gradient with respect to u^(nt-1)",
                              ": the gradient with respect to the end's layer memories"});
}

template <class Real>
std::array<int, 3> Modeling<Real>::padded_shape() const {
  return m_impl->padded_shape();
}

template <class Real>
long long Modeling<Real>::memory_values(int axis) const {
  int const dim = m_impl->setup.grid.dim();
  KSWEEP_REQUIRE(axis >= 0 && axis < dim,
                 "ksweep::fwi::Modeling::memory_values: axis = " << axis << " is not one of 0.." << dim - 1);
  return m_impl->memory_values(axis);
}

template <class Real>
long long Modeling<Real>::memory_values() const {
  long long n = 0;
  for (int a = 0; a < m_impl->setup.grid.dim(); ++a) n += 2 * m_impl->memory_values(a);
  return n;
}

template <class Real>
void Modeling<Real>::adjoint(Real const* records, Real* wavelet_grad) {
  check_records<Real>(*m_impl, records, "ksweep::fwi::Modeling::adjoint: the records");
  m_impl->adjoint(records, wavelet_grad, EndGradient<Real>{});
}

template <class Real>
void Modeling<Real>::adjoint(Real const* records, Real* wavelet_grad, EndGradient<Real> const& end) {
  auto staged = staged_state(*this, *m_impl);
  auto const e = staged.end(end);
  check_records<Real>(*m_impl, records, "ksweep::fwi::Modeling::adjoint: the records");
  check_end(e, "ksweep::fwi::Modeling::adjoint");
  m_impl->adjoint(records, wavelet_grad, e);
}

template <class Real>
double Modeling<Real>::gradient(Real const* wavelets, Real const* observed, double scale, ModelingImages const& out,
                                Real* synthetic, double* shot_losses) {
  KSWEEP_REQUIRE(std::isfinite(scale) && scale > 0,
                 "ksweep::fwi::Modeling::gradient: the loss scale = " << scale << " must be a finite number > 0");
  check_wavelets<Real>(*m_impl, wavelets, "ksweep::fwi::Modeling::gradient: the source amplitudes");
  check_records<Real>(*m_impl, observed, "ksweep::fwi::Modeling::gradient: the observed data");
  return m_impl->gradient(wavelets, observed, scale, out, synthetic, shot_losses);
}

template <class Real>
void Modeling<Real>::vjp(Real const* wavelets, Real const* residual, ModelingImages const& out) {
  check_wavelets<Real>(*m_impl, wavelets, "ksweep::fwi::Modeling::vjp: the source amplitudes");
  check_records<Real>(*m_impl, residual, "ksweep::fwi::Modeling::vjp: the residual");
  m_impl->vjp(wavelets, residual, out, ForwardState<Real>{}, VjpExtras<Real>{});
}

template <class Real>
void Modeling<Real>::vjp(Real const* wavelets, Real const* residual, ModelingImages const& out,
                         ForwardState<Real> const& start, VjpExtras<Real> const& more) {
  auto staged = staged_state(*this, *m_impl);
  auto const st = staged.state(start);
  VjpExtras<Real> x = more;
  x.end = staged.end(more.end);
  x.start_now = staged.out(more.start_now);
  x.start_before = staged.out(more.start_before);
  x.start_memory = staged.out(more.start_memory, true);
  check_wavelets<Real>(*m_impl, wavelets, "ksweep::fwi::Modeling::vjp: the source amplitudes");
  check_records<Real>(*m_impl, residual, "ksweep::fwi::Modeling::vjp: the residual");
  check_start(st, "ksweep::fwi::Modeling::vjp");
  check_end(x.end, "ksweep::fwi::Modeling::vjp");
  KSWEEP_REQUIRE(!x.start_gradient() || !m_impl->setup.domains.split(),
                 "ksweep::fwi::Modeling::vjp: the gradient with respect to the start state on a model split into "
                 "domains (parallel.domains) is not supported; run it on whole-model ranks");
  m_impl->vjp(wavelets, residual, out, st, x);
  staged.done();
}

template <class Real>
void Modeling<Real>::born(Real const* wavelets, Real const* scatter, Real* records) {
  check_wavelets<Real>(*m_impl, wavelets, "ksweep::fwi::Modeling::born: the source amplitudes");
  KSWEEP_REQUIRE(scatter, "ksweep::fwi::Modeling::born: no velocity perturbation (scatter) given");
  KSWEEP_REQUIRE(records, "ksweep::fwi::Modeling::born: no records array given");
  detail::require_finite(m_impl->arrays == Arrays::device, scatter,
                         static_cast<std::size_t>(m_impl->setup.grid.cells()),
                         "ksweep::fwi::Modeling::born: the velocity perturbation (scatter)", detail::cell_position);
  m_impl->born(wavelets, scatter, records);
}

template <class Real>
void Modeling<Real>::set_cross_correlation(bool on) {
  m_impl->cross_correlation = on;
}

template <class Real>
void Modeling<Real>::set_reverse_watch(std::function<void(ReverseView<Real> const&)> watch, std::vector<int> steps) {
  KSWEEP_REQUIRE(!watch || !m_impl->setup.ranks || (m_impl->setup.ranks->size() == 1 && !m_impl->setup.domains.split()),
                 "set_reverse_watch: a reverse watch runs on one rank's whole model, not with ranks or domains");
  m_impl->reverse_watch = std::move(watch);
  m_impl->reverse_watch_steps = std::move(steps);
}

template <class Real>
void Modeling<Real>::set_after_batch(std::function<void(int, int)> f) {
  m_impl->after_batch = std::move(f);
}

template <class Real>
void Modeling<Real>::set_arrays(Arrays where) {
  auto const& s = m_impl->setup;
  KSWEEP_REQUIRE(where == Arrays::host || ((!s.ranks || s.ranks->size() == 1) && !s.domains.split()),
                 "ksweep::fwi::Modeling::set_arrays: device arrays serve one rank's whole model; with ranks or "
                 "domains give host arrays");
  m_impl->arrays = where;
}

template <class Real>
Arrays Modeling<Real>::arrays() const {
  return m_impl->arrays;
}

template class Modeling<float>;
template class Modeling<double>;

}  // namespace ksweep::fwi
