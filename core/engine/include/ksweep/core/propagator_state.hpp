#pragma once
/// \file propagator_state.hpp
/// Propagator: the forward state of a batch (wavefields and layer memories) in and out of host
/// arrays, for runs that start from a given state or hand theirs on, the adjoint wavefields
/// during a reverse sweep, and the gradient with respect to an end state where a sweep starts
/// (included by propagator.hpp).

#include <ksweep/core/propagator.hpp>

#include <algorithm>

namespace ksweep::core {

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::set_forward_state(Real const* now, Real const* before,
                                                                               Real const* memory) {
  forward_reset();
  State& st = m_fwd;
  Real const* const level[2] = {now, before};
  for (int i = 0; i < 2; ++i)
    if (level[i]) {
      auto h = Kokkos::create_mirror_view(st.u[i]);
      Kokkos::deep_copy(h, st.u[i]);  // the halo's zeros
      padded_copy(h, level[i], nullptr);
      Kokkos::deep_copy(m_space, st.u[i], h);
    }
  if (memory) memory_copy(st, memory, nullptr);
  m_space.fence();
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::get_forward_state(Real* now, Real* before,
                                                                               Real* memory) const {
  m_space.fence();
  State const& st = m_fwd;
  Real* const level[2] = {now, before};
  for (int i = 0; i < 2; ++i)
    if (level[i]) {
      auto const& u = st.u[i == 0 ? st.cur : 1 - st.cur];
      auto h = Kokkos::create_mirror_view(u);
      Kokkos::deep_copy(h, u);
      padded_copy(h, nullptr, level[i]);
    }
  if (memory) memory_copy(st, nullptr, memory);
}

// The host copy `h` of an adjoint level [shot][field row][column] divided by c, cell by cell (mu
// = c lambda to lambda); the halo, where c is 0, is left as it is.
template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
template <class HostField, class HostC>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::divide_by_c(HostField const& h, HostC const& c) {
  for (std::size_t s = 0; s < h.extent(0); ++s)
    for (std::size_t r = 0; r < h.extent(1); ++r)
      for (std::size_t k = 0; k < h.extent(2); ++k)
        if (c(r, k) != Real(0)) h(s, r, k) /= c(r, k);
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::get_adjoint_state(Real* now, Real* next,
                                                                               Real* memory) const {
  m_space.fence();
  State const& st = m_adj;
  auto const c = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_c);
  Real* const level[2] = {now, next};
  for (int i = 0; i < 2; ++i)
    if (level[i]) {
      auto const& u = st.u[i == 0 ? st.cur : 1 - st.cur];
      auto h = Kokkos::create_mirror(Kokkos::HostSpace(), u);  // a copy also on host backends: divided here
      Kokkos::deep_copy(h, u);
      divide_by_c(h, c);  // lambda = mu / c
      padded_copy(h, nullptr, level[i]);
    }
  if (memory) memory_copy(st, nullptr, memory);
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::set_adjoint_state(Real const* now, Real const* next,
                                                                               Real const* memory) {
  put_adjoint_state(now, next, memory, false, Real(1));
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::add_adjoint_end(AdjointEnd<Real> const& end) {
  put_adjoint_state(end.now, end.before, end.memory, true, Real(-1));  // lambda^{nt+1} = -dL/du^{nt-1}
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::put_adjoint_state(Real const* now, Real const* next,
                                                                               Real const* memory, bool add,
                                                                               Real next_sign) {
  m_space.fence();
  State& st = m_adj;
  auto const c = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_c);
  Real const* const level[2] = {now, next};
  Real const sign[2] = {Real(1), next_sign};
  for (int i = 0; i < 2; ++i)
    if (level[i]) {
      auto const& u = st.u[i == 0 ? st.cur : 1 - st.cur];
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), u);  // the halo's values (host: u itself)
      auto g = Kokkos::create_mirror(Kokkos::HostSpace(), u);
      Kokkos::deep_copy(g, Real(0));  // the halo, where c is 0
      padded_copy(g, level[i], nullptr);
      for (std::size_t s = 0; s < h.extent(0); ++s)
        for (std::size_t r = 0; r < h.extent(1); ++r)
          for (std::size_t k = 0; k < h.extent(2); ++k)
            if (c(r, k) != Real(0)) {
              Real const mu = sign[i] * (g(s, r, k) * c(r, k));  // mu = c lambda
              h(s, r, k) = add ? h(s, r, k) + mu : mu;
            }
      Kokkos::deep_copy(m_space, u, h);
      exchange(u);
    }
  if (memory) memory_copy(st, memory, nullptr);
  m_space.fence();
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
template <class HostField>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::padded_copy(HostField const& h, Real const* from,
                                                                         Real* to) const {
  auto const& l = m_layout;
  std::size_t k = 0;
  for (int s = 0; s < m_survey.n_shots; ++s)
    for (int iz = 0; iz < l.NZ; ++iz)
      for (int iy = 0; iy < l.NY; ++iy, k += static_cast<std::size_t>(l.NX)) {
        Real* const row = &h(s, l.field_row(iz, iy), R);  // NX contiguous values
        if (!from) std::copy(row, row + l.NX, to + k);
        else if (l.free_surface && iz == 0) std::fill(row, row + l.NX, Real(0));
        else std::copy(from + k, from + k + l.NX, row);
      }
}

// Set from `from`, or written to `to`, the slots that hold no memory are zero, as every run keeps
// them: a strip's slots of cells outside the grid, of the model's cells (the zeta slots of those
// next to the layer hold a layer term, an output of the step, not a state) and of the other
// side's, and of undamped layer cells (a physics' inset), where the cell profile's mask is 0. The
// step's stencil reads some of them (Dx psi reaches M cells on), and the adjoint, whose memories
// are masked, keeps them zero: so a start is exactly what a run could hand on, an end holds the
// state alone (a loss of it has the gradient add_adjoint_end takes), and get_adjoint_state's
// memories are the start's gradient.
template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::memory_copy(State const& st, Real const* from,
                                                                         Real* to) const {
  std::size_t const per_shot = memory_values();
  std::size_t offset = 0;  // of the strip within a shot's values
  auto const axes = grid_axes<Dim>(m_layout);
  int const y_rows = Dim == 3 ? std::max(m_layout.front, m_layout.back) + 4 * R : 1;  // a y strip's rows per z
  for (int a = 0; a < Dim; ++a) {
    auto const mask = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_prof_mask[a]);
    GridAxis const ax = axes[a];
    // Whether slot j of strip `side` holds the memory of a damped cell of that side.
    auto const memory_slot = [&](int side, int j) {
      int const i = side == 0 ? j - 2 * R : j + ax.lo + ax.n - 2 * R;
      return i >= 0 && i < ax.N && ax.side(i) == side && mask(i + R) != 0;
    };
    for (field4 const& f : {st.psi[a][st.aux], st.zeta[a][st.aux]}) {
      auto h = Kokkos::create_mirror_view(f);
      Kokkos::deep_copy(h, f);
      std::size_t const block = f.extent(2) * f.extent(3);  // one side of one shot, contiguous
      for (int s = 0; s < m_survey.n_shots; ++s) {
        std::size_t k = static_cast<std::size_t>(s) * per_shot + offset;
        for (std::size_t side = 0; side < f.extent(0); ++side, k += block) {
          Real* const b = &h(side, s, 0, 0);
          Real* const out = from ? b : to + k;
          std::copy(from ? from + k : b, (from ? from + k : b) + block, out);
          for (std::size_t r = 0; r < f.extent(2); ++r)
            for (std::size_t q = 0; q < f.extent(3); ++q) {
              // The slot's place along axis a: z strips by row, y strips by row within a z, x by column.
              int const j = a == Dim - 1 ? static_cast<int>(q)
                            : a == 0     ? static_cast<int>(r)
                                         : static_cast<int>(r) % y_rows;
              if (!memory_slot(static_cast<int>(side), j)) out[r * f.extent(3) + q] = Real(0);
            }
        }
      }
      if (from) Kokkos::deep_copy(f, h);
      offset += f.extent(0) * f.extent(2) * f.extent(3);
    }
  }
}

}  // namespace ksweep::core
