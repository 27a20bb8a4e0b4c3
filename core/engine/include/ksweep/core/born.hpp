#pragma once
/// \file born.hpp
/// Born (linearised) modelling: the derivative of the Propagator's records in the direction of a
/// velocity perturbation dv, exactly (the transpose is the gradient's vector-Jacobian product).
///
/// Both physics step the field as u^{n+1} = 2 u^n - u^{n-1} + w^n + c sum_a T_a(u^n), with c
/// proportional to v^2 (c = v^2 dt^2 / dh^2, or rho v^2 dt^2 / dh^2), the raw source amplitude w^n
/// at the source cells, and T, the CPML memories and the free surface linear in u and free of v.
/// The derivative du therefore steps with the same operator and the scattering source
///   s^n = (dc / c) c sum_a T_a(u^n) = k (u^{n+1} - 2 u^n + u^{n-1} - w^n),   k = 2 dv / v,
/// which the background's own step provides: the scattered field du is a second forward state of
/// the Propagator, and s^n enters it as the sources do, through the "- du^{n-1}" of its step
/// (BornSource, before and after the background's step). k lives on the padded grid like c: on
/// the model cells, and on the absorbing layer's cells when the layer repeats the model's edges
/// (Propagator::layer_copies_model: the edge cells' perturbation reaches the layer, as the
/// gradient's chain rule for the layer takes it), 0 elsewhere.
///
/// Cost per time step: the background's step, the scattered field's step and two passes over the
/// fields of the batch (BornSource), against one step for forward(). Host backends run the
/// `shots` schedule where forward() does (a thread steps one shot's background and scattered
/// field together, its fields in the cache), else the batched launches: the same bits.

#include <ksweep/core/propagator.hpp>

#include <cstdint>

namespace ksweep::core {

/// du^{n-1} -= k (a + beta b) on every cell of the fields of the batch's shots (b null: k a); the
/// fields [shot][field row][column] share the layout of k [field row][column]. Host backends call
/// it per row of a shot's field (a contiguous run of `cols` cells, vectorised), devices per cell
/// (shot, cell of the shot's field).
template <class Real, class MemorySpace>
struct BornSource {
  Real* du = nullptr;
  Real const* a = nullptr;
  Real const* b = nullptr;
  Real const* k = nullptr;
  Real beta = 0;
  std::int64_t rows = 0, cols = 0;  // of one shot's field
  /// Cell j of the batch's fields (devices: consecutive threads on consecutive cells).
  struct Cell {};
  KOKKOS_INLINE_FUNCTION void operator()(Cell, std::int64_t j) const {
    std::int64_t const i = j % (rows * cols);
    Real const v = b ? a[j] + beta * b[j] : a[j];
    du[j] -= k[i] * v;
  }
  /// Row r of the batch's fields ([shot][field row] flattened).
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r) const {
    std::int64_t const j0 = r * cols, k0 = (r % rows) * cols;
    Real* KOKKOS_RESTRICT out = du + j0;
    Real const* KOKKOS_RESTRICT x = a + j0;
    Real const* KOKKOS_RESTRICT w = k + k0;
    if (b) {
      Real const* KOKKOS_RESTRICT y = b + j0;
      for (std::int64_t c = 0; c < cols; ++c) out[c] -= w[c] * (x[c] + beta * y[c]);
    } else {
      for (std::int64_t c = 0; c < cols; ++c) out[c] -= w[c] * x[c];
    }
  }
};

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
typename Propagator<Real, Order, ExecSpace, Dimension, Physics>::field2
Propagator<Real, Order, ExecSpace, Dimension, Physics>::born_scale(velocity_view const& dvp) const {
  auto const& l = m_layout;
  KSWEEP_REQUIRE(m_vp_model.extent(0) > 0, "Born modelling: no velocity set");
  KSWEEP_REQUIRE(static_cast<int>(dvp.extent(0)) == l.model_rows() && static_cast<int>(dvp.extent(1)) == l.nx,
                 "Born modelling: the velocity perturbation is [" << dvp.extent(0) << "][" << dvp.extent(1)
                                                                  << "], the grid [" << l.model_rows() << "][" << l.nx
                                                                  << "]");
  field2 k(Kokkos::view_alloc(m_space, std::string("ksweep::core::born_scale")), l.field_rows(), l.NX + 2 * R);
  auto const v = m_vp_model;
  int const width = l.left, nz = l.nz, ny = l.ny, nx = l.nx, NY = l.NY, top = l.top, front = l.front;
  bool const layer = m_layer_copies_model;
  Rows<Dim> const rows(l);
  using policy2 = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>;
  launch_for(
      "ksweep::core::born_scale", policy2(m_space, {0, 0}, {l.rows(), l.NX}), KOKKOS_LAMBDA(int pr, int ix) {
        int const iz = pr / NY, iy = pr - iz * NY;
        int const qz = iz - top, qy = iy - front, qx = ix - width;
        bool const model = qz >= 0 && qz < nz && qy >= 0 && qy < ny && qx >= 0 && qx < nx;
        if (!model && !layer) return;
        int const mz = qz < 0 ? 0 : (qz > nz - 1 ? nz - 1 : qz);
        int const my = qy < 0 ? 0 : (qy > ny - 1 ? ny - 1 : qy);
        int const mx = qx < 0 ? 0 : (qx > nx - 1 ? nx - 1 : qx);
        int const mr = mz * ny + my;
        k(rows.field(iz, iy), ix + R) = Real(2) * dvp(mr, mx) / v(mr, mx);
      });
  m_space.fence();
  return k;
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::born(wavelet_view const& wavelets, field2 const& k,
                                                                  record_view const& records) {
  check_batch(wavelets, records);
  KSWEEP_REQUIRE(k.extent(0) == m_c.extent(0) && k.extent(1) == m_c.extent(1),
                 "Born modelling: the scale is [" << k.extent(0) << "][" << k.extent(1) << "], not born_scale()'s ["
                                                  << m_c.extent(0) << "][" << m_c.extent(1) << "]");
  int const nt = static_cast<int>(wavelets.extent(2));
  forward_reset();
  if (m_born.u[0].extent(0) == 0) allocate_state(m_born, "born");
  reset_state(m_born);
  std::int64_t const rows = static_cast<std::int64_t>(m_c.extent(0)), cols = static_cast<std::int64_t>(m_c.extent(1));
  std::int64_t const shots = m_survey.n_shots;
  auto source = [&](field3 const& a, field3 const& b, Real beta) {
    BornSource<Real, memory_space> f{m_born.u[1 - m_born.cur].data(), a.data(), b.data(), k.data(), beta, rows, cols};
    using rows_policy = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
    using cells_policy =
        Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>, typename BornSource<Real, memory_space>::Cell>;
    if constexpr (ksweep::impl::launches_on_host<rows_policy>)
      launch_for("ksweep::core::born_source", rows_policy(m_space, 0, shots * rows), f);
    else launch_for("ksweep::core::born_source", cells_policy(m_space, 0, shots * rows * cols), f);
  };
  if (runs_shots()) {
    // The `shots` schedule: each thread takes whole shots and runs their time loops with the
    // bodies below, in the batched launches' order, so that a shot's two states stay in the
    // cache; the same bits as the batched steps.
    if constexpr (impl::runs_by_rows<ExecSpace>) {
      auto const bg = forward_shot_step(wavelets, record_view());  // the sources, no records
      auto const sc = shot_step<ForwardTag>(                       // the scattered records, no sources
          m_born,
          points({m_born.u[1 - m_born.cur], &m_sources, wavelet_view(), false, -1},
                 {m_born.u[m_born.cur], &m_receivers, records, true, -1}, false),
          0);
      BornSource<Real, memory_space> const f0{nullptr, nullptr, nullptr, k.data(), Real(0), rows, cols};
      auto const body = [bg, sc, f0, rows](int s, int n) {
        auto const& kb = bg.at(n);
        auto const& ks = sc.at(n);
        bg.points(s, n);
        sc.points(s, n);
        BornSource<Real, memory_space> f = f0;
        f.du = ks.m_out.data();
        f.a = kb.m_out.data();  // u^{n-1} (its sources in), then u^{n+1}
        f.b = kb.m_cur.data();  // u^n
        f.beta = Real(-2);
        for (std::int64_t r = s * rows; r < (s + 1) * rows; ++r) f(r);
        bg.stencil(s, n);
        f.b = nullptr;
        f.beta = Real(0);
        for (std::int64_t r = s * rows; r < (s + 1) * rows; ++r) f(r);
        sc.stencil(s, n);
      };
      launch_shot_steps(m_space, "ksweep::core::born_shots", body, m_survey.n_shots, 0, nt, false);
      if (nt % 2 != 0) {
        rotate(m_fwd);
        rotate(m_born);
      }
    }
  } else {
    for (int n = 0; n < nt; ++n) {
      // The sources w[n] into u^{n-1} (with a minus sign: the step adds them to u^{n+1}) and the
      // scattered records r[n-1] = du^n, in one launch.
      auto const w = points({m_fwd.u[1 - m_fwd.cur], &m_sources, wavelets, false, n},
                            {m_born.u[m_born.cur], &m_receivers, records, true, n - 1}, false);
      launch_points(m_space, "ksweep::core::born_points", w.f, w.count);
      // s^n = k (u^{n+1} - 2 u^n + (u^{n-1} - w^n)) into du^{n-1}, with a minus sign: the
      // background's levels before its step, then the one it wrote.
      source(m_fwd.u[1 - m_fwd.cur], m_fwd.u[m_fwd.cur], Real(-2));
      advance_forward();
      source(m_fwd.u[m_fwd.cur], field3(), Real(0));
      step<ForwardTag>(m_born, "ksweep::core::born_step");
    }
  }
  if (records.extent(0) > 0) {
    SamplePoints<Real, memory_space> sample{m_born.u[m_born.cur], records, m_receivers, nt - 1, true, {}};
    launch_points(m_space, "ksweep::core::sample_receivers", sample, m_survey.n_shots * sample.count());
  }
  gather_records(records);
  m_space.fence();
}

}  // namespace ksweep::core
