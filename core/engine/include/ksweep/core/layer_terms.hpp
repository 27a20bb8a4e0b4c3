#pragma once
/// \file layer_terms.hpp
/// What the gradient (gradient.hpp) keeps of the absorbing layer, which neither its imaging nor
/// its reversal can compute from the wavefield:
///  - the layer terms: the model cells within the physics' forward_reach of the layer have a
///    term of the layer in their step (Dx psi, see acoustic_kernels.hpp); every forward step saves
///    it (SaveLayerTerms) and the backward pass adds it to those cells' images and rebuilt values
///    (ApplyLayerTerms);
///  - the layer's chain rule: where the layer repeats the model's edge cells, each layer cell's
///    D^n = u^{n+1} - 2 u^n + u^{n-1} (minus its sources) is saved every forward step (LayerSave,
///    LayerSources), correlated with the adjoint field backward (LayerChain) and folded into the
///    edge cells' dL/dv after the backward pass (LayerFold).
/// The cells are listed on the host (layer_term_cells, layer_cells), in a fixed order, so that
/// the sums they take part in do not depend on the schedule.

#include <ksweep/base/error.hpp>
#include <ksweep/core/kernel_grid.hpp>
#include <ksweep/core/sizes.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ksweep::core {

/// The model cells whose forward step has layer terms (within `reach` of a layer face along an
/// axis), one entry per cell and axis (a cell near a corner has one per axis), axis by axis in
/// increasing order of the cells: the cell's value of that axis' layer term lies in the forward
/// zeta strip of the axis (AcousticCell), at `strip` (side * side_stride + offset within a
/// shot) of axis `axis`; `model` is the cell's row-major model index, `field` its offset in a
/// shot's padded field (and in c). Empty for reach 0.
struct LayerTermCells {
  std::vector<int> axis, strip, model, field;
  int size() const { return static_cast<int>(axis.size()); }
};

/// The layer-term cells of layout `l` for a forward reach `reach`, with strips of R zero cells
/// on each side and `max_shots` shots per strip side (see PhysicsStep's strips).
template <int Dim>
LayerTermCells layer_term_cells(Layout const& l, int reach, int R, int max_shots) {
  LayerTermCells c;
  if (reach <= 0) return c;
  auto const axes = grid_axes<Dim>(l);
  auto const ext = strip_extents(l);
  int const lo[3] = {l.top, Dim == 3 ? l.front : 0, l.left}, nm[3] = {l.nz, Dim == 3 ? l.ny : 1, l.nx};
  int const NY = l.NY, NX = l.NX, row = NX + 2 * R;
  for (int a = 0; a < Dim; ++a) {
    GridAxis const& ax = axes[a];
    long long const side_stride = static_cast<long long>(max_shots) * ext[a][0] * ext[a][1];
    for (int mz = 0; mz < nm[0]; ++mz)
      for (int my = 0; my < nm[1]; ++my)
        for (int mx = 0; mx < nm[2]; ++mx) {
          int const iz = mz + lo[0], iy = my + lo[1], ix = mx + lo[2];
          int const p[3] = {iz, Dim == 3 ? iy : ix, ix};  // the cell's coordinate per axis index
          int const i = p[a];
          if (!ax.near_layer(i, reach)) continue;
          int const side = ax.side(i), si = ax.strip_index(side, i, R);
          long long off;
          if (a == 0) off = (static_cast<long long>(si) * NY + iy) * NX + ix;
          else if (a == Dim - 1) off = (static_cast<long long>(iz) * NY + iy) * ext[a][1] + si;
          else off = (static_cast<long long>(iz) * (ext[1][0] / l.NZ) + si) * NX + ix;
          long long const at = side * side_stride + off;
          KSWEEP_REQUIRE(at < (1LL << 31), "ksweep::core::layer_term_cells: strip offset " << at << " exceeds 2^31");
          c.axis.push_back(a);
          c.strip.push_back(static_cast<int>(at));
          c.model.push_back((mz * nm[1] + my) * nm[2] + mx);
          c.field.push_back(l.field_row(iz, iy) * row + ix + R);
        }
  }
  return c;
}

/// The absorbing layer's cells of layout `l` (the padded cells outside the model grid, halo of R
/// cells around the padded grid), in row-major order: `field` the cell's offset in a shot's
/// padded field (increasing), `model` the row-major model index of the edge cell it copies
/// (the nearest model cell, as Propagator::set_velocity fills the layer).
template <int Dim>
LayerTermCells layer_cells(Layout const& l, int R) {
  LayerTermCells c;
  int const lo[3] = {l.top, Dim == 3 ? l.front : 0, l.left}, nm[3] = {l.nz, Dim == 3 ? l.ny : 1, l.nx};
  int const row = l.NX + 2 * R;
  for (int iz = 0; iz < l.NZ; ++iz)
    for (int iy = 0; iy < l.NY; ++iy)
      for (int ix = 0; ix < l.NX; ++ix) {
        int const p[3] = {iz, iy, ix};
        bool model = true;
        int m = 0;
        for (int a = 0; a < 3; ++a) {
          int const q = p[a] - lo[a];
          model = model && q >= 0 && q < nm[a];
          m = m * nm[a] + std::clamp(q, 0, nm[a] - 1);
        }
        if (model) continue;
        long long const f = static_cast<long long>(l.field_row(iz, iy)) * row + ix + R;
        KSWEEP_REQUIRE(f < (1LL << 31), "ksweep::core::layer_cells: field offset " << f << " exceeds 2^31");
        c.field.push_back(static_cast<int>(f));
        c.model.push_back(m);
      }
  return c;
}

/// Forward step n: the layer terms of the layer-term cells (LayerTermCells), read from the zeta
/// strips the step wrote (their slots hold the unweighted term there) and weighted by the axis'
/// weight, into m_terms(n).
template <class Real, class MemorySpace, int Dim>
struct SaveLayerTerms {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_terms;  // [step][shot][layer-term cell]
  Kokkos::View<Real****, Kokkos::LayoutRight, MemorySpace> m_zeta[Dim];
  Kokkos::View<int const*, MemorySpace> m_axis, m_strip;
  // The axes' weights (Layout::weight): the term is w Dx psi. Four reals and two ints: no padding
  // (a launch trace reads every byte of a functor).
  Real m_w[4] = {Real(1), Real(1), Real(1), Real(1)};
  int m_cells = 0, m_n = 0;
  KOKKOS_INLINE_FUNCTION void apply(int n, int s, int j) const {
    int const a = m_axis(j);
    auto const& z = m_zeta[a];
    m_terms(n, s, j) =
        m_w[a] * z.data()[static_cast<std::size_t>(s) * z.stride(1) + static_cast<std::size_t>(m_strip(j))];
  }
  KOKKOS_INLINE_FUNCTION void operator()(int i) const { apply(m_n, i / m_cells, i % m_cells); }
};

/// Backward step n: the layer terms E of step n added to the images (grad += mu^{n+1} E) and,
/// when rebuilding, to the rebuilt u^{n-1} (+= c E), cell after cell in a fixed order per shot
/// (a cell near a corner has a term per axis).
template <class Real, class MemorySpace>
struct ApplyLayerTerms {
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_terms;
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_lambda;  // mu^{n+1}
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_u1;            // u^{n-1} being rebuilt
  Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace> m_c;
  Kokkos::View<double***, Kokkos::LayoutRight, MemorySpace> m_grad;  // [shot][model row][nx]
  Kokkos::View<int const*, MemorySpace> m_model, m_field;
  int m_cells = 0, m_n = 0;
  int m_rebuild = 0;  // four ints: no padding (a launch trace reads every byte of a functor)
  int m_unused = 0;
  KOKKOS_INLINE_FUNCTION void apply(int s, int n, bool rebuild) const {
    Real const* mu = m_lambda.data() + static_cast<std::size_t>(s) * m_lambda.stride(0);
    Real* u1 = m_u1.data() + static_cast<std::size_t>(s) * m_u1.stride(0);
    double* g = &m_grad(s, 0, 0);
    for (int j = 0; j < m_cells; ++j) {
      Real const e = m_terms(n, s, j);
      int const f = m_field(j);
      g[m_model(j)] += static_cast<double>(mu[f] * e);
      if (rebuild) u1[f] = u1[f] + m_c.data()[f] * e;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(int s) const { apply(s, m_n, m_rebuild); }
};

/// Forward step n (the layer's chain rule): D^n = u^{n+1} - 2 u^n + u^{n-1} of each layer cell
/// (the last three levels in m_roll, slot k % 3 holding u^k), minus the step's sources at their
/// taps in the layer, into m_d(n).
template <class Real, class MemorySpace>
struct LayerSave {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_roll, m_d;  // [slot or step][shot][layer cell]
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_u;          // u^{n+1} (the batched schedule)
  Kokkos::View<int const*, MemorySpace> m_field;
  Kokkos::View<int const*, MemorySpace> m_src_off, m_src_cell,
      m_src_point;  // the sources' taps in layer cells, per shot
  Kokkos::View<Real const*, MemorySpace> m_src_w;
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_w;  // [shot][source][time]
  int m_cells = 0, m_n = 0;
  KOKKOS_INLINE_FUNCTION void cell(Real const* u, int n, int s, int j) const {
    Real const u1 = u[m_field(j)];
    double const d = static_cast<double>(u1) - 2.0 * static_cast<double>(m_roll(n % 3, s, j)) +
                     static_cast<double>(m_roll((n + 2) % 3, s, j));
    m_d(n, s, j) = static_cast<Real>(d);
    m_roll((n + 1) % 3, s, j) = u1;
  }
  KOKKOS_INLINE_FUNCTION void sources(int n, int s) const {
    for (int k = m_src_off(s); k < m_src_off(s + 1); ++k)
      m_d(n, s, m_src_cell(k)) -= m_src_w(k) * m_w(s, m_src_point(k), n);
  }
  KOKKOS_INLINE_FUNCTION void shot(Real const* u, int n, int s) const {
    for (int j = 0; j < m_cells; ++j) cell(u, n, s, j);
    sources(n, s);
  }
  KOKKOS_INLINE_FUNCTION void operator()(int i) const {
    int const s = i / m_cells;
    cell(m_u.data() + static_cast<std::size_t>(s) * m_u.stride(0), m_n, s, i % m_cells);
  }
};
/// A forward run from a start state (the layer's chain rule): u^0 and u^{-1} of each layer cell
/// into LayerSave's slots 0 and 2, before the first step injects its sources into u^{-1}.
template <class Real, class MemorySpace>
struct LayerStart {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_roll;           // [slot][shot][layer cell]
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_now, m_before;  // u^0, u^{-1}
  Kokkos::View<int const*, MemorySpace> m_field;
  int m_cells = 0;
  KOKKOS_INLINE_FUNCTION void operator()(int i) const {
    int const s = i / m_cells, j = i % m_cells;
    std::size_t const f = static_cast<std::size_t>(m_field(j));
    m_roll(0, s, j) = m_now.data()[static_cast<std::size_t>(s) * m_now.stride(0) + f];
    m_roll(2, s, j) = m_before.data()[static_cast<std::size_t>(s) * m_before.stride(0) + f];
  }
};

/// The batched schedule's second launch of LayerSave, per shot.
template <class Real, class MemorySpace>
struct LayerSources {
  LayerSave<Real, MemorySpace> m_save;
  KOKKOS_INLINE_FUNCTION void operator()(int s) const { m_save.sources(m_save.m_n, s); }
};

/// Backward step n (the layer's chain rule): acc += mu^{n+1} D^n at each layer cell.
template <class Real, class MemorySpace>
struct LayerChain {
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_d;
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_lambda;  // mu^{n+1}
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> m_acc;          // [shot][layer cell]
  Kokkos::View<int const*, MemorySpace> m_field;
  int m_cells = 0, m_n = 0;
  KOKKOS_INLINE_FUNCTION void cell(int n, int s, int j) const {
    Real const mu = m_lambda.data()[static_cast<std::size_t>(s) * m_lambda.stride(0) + m_field(j)];
    m_acc(s, j) += static_cast<double>(mu) * static_cast<double>(m_d(n, s, j));
  }
  KOKKOS_INLINE_FUNCTION void shot(int s, int n) const {
    for (int j = 0; j < m_cells; ++j) cell(n, s, j);
  }
  KOKKOS_INLINE_FUNCTION void operator()(int i) const { cell(m_n, i / m_cells, i % m_cells); }
};

/// After the backward pass: each shot's layer sums folded into its edge cells' dL/dv, layer
/// cell after layer cell (row-major), dL/dv += (2 / v) acc / c.
template <class Real, class MemorySpace>
struct LayerFold {
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> m_acc;    // [shot][layer cell]
  Kokkos::View<double***, Kokkos::LayoutRight, MemorySpace> m_grad;  // [shot][model row][nx]
  Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace> m_c;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_vp;
  Kokkos::View<int const*, MemorySpace> m_field, m_model;
  int m_cells = 0;
  KOKKOS_INLINE_FUNCTION void operator()(int s) const {
    double* g = &m_grad(s, 0, 0);
    for (int j = 0; j < m_cells; ++j) {
      int const m = m_model(j);
      g[m] += 2.0 / static_cast<double>(m_vp.data()[m]) * m_acc(s, j) / static_cast<double>(m_c.data()[m_field(j)]);
    }
  }
};

}  // namespace ksweep::core
