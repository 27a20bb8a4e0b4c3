#pragma once
/// \file propagator_setup.hpp
/// The set-up of the Propagator (propagator.hpp), defined out of its class: the model (the
/// velocity, or velocity and density, with the absorbing layer's copy of its edges and the CFL
/// check), the layer's damping profiles, and the survey's points on the device.

#include <ksweep/core/propagator.hpp>

namespace ksweep::core {

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::set_velocity(velocity_view const& vp, bool update_layer) {
  static_assert(std::is_same_v<Physics, Acoustic>, "set_velocity: constant-density acoustics (else set_model)");
  auto const& l = m_layout;
  KSWEEP_REQUIRE(static_cast<int>(vp.extent(0)) == l.model_rows() && static_cast<int>(vp.extent(1)) == l.nx,
                 "ksweep::core::Propagator::set_velocity: the model is ["
                     << vp.extent(0) << "][" << vp.extent(1) << "], the grid [" << l.model_rows() << "][" << l.nx
                     << "]");
  int const nz = l.model_rows(), nx = l.nx;
  long long const n = static_cast<long long>(nz) * nx;
  // The first cell that is not finite and > 0, in row-major order (as check_velocity finds it).
  long long first_bad = n;
  launch_reduce(
      "ksweep::core::check_velocity", Kokkos::RangePolicy<ExecSpace>(m_space, 0, n),
      KOKKOS_LAMBDA(long long i, long long& first) {
        Real const v = vp(i / nx, i % nx);
        bool const ok = v > 0 && v - v == 0;  // NaN fails the first test, infinity the second
        if (!ok && i < first) first = i;
      },
      Kokkos::Min<long long>(first_bad));
  if (first_bad < n) {
    Kokkos::View<Real, Kokkos::HostSpace> bad("ksweep::core::bad_velocity");
    Kokkos::deep_copy(m_space, bad, Kokkos::subview(vp, first_bad / nx, first_bad % nx));
    m_space.fence();
    KSWEEP_REQUIRE(false, "velocity at cell " << first_bad << " is " << bad() << ": velocities must be finite and > 0");
  }
  Kokkos::MinMaxScalar<Real> range;
  launch_reduce(
      "ksweep::core::velocity_range", Kokkos::RangePolicy<ExecSpace>(m_space, 0, n),
      KOKKOS_LAMBDA(long long i, Kokkos::MinMaxScalar<Real>& r) {
        Real const v = vp(i / nx, i % nx);
        if (v < r.min_val) r.min_val = v;
        if (v > r.max_val) r.max_val = v;
      },
      Kokkos::MinMax<Real>(range));
  double const scale = m_dt * m_dt / (m_grid.dh * m_grid.dh);
  auto coef = m_c;
  int const width = l.left, mz_n = l.nz, my_n = l.ny, NY = l.NY, top = l.top, front = l.front;
  Rows<Dim> const rows(l);
  using policy2 = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>;
  m_layer_copies_model = update_layer || m_vp_model.extent(0) == 0;
  if (m_layer_copies_model) {
    check_cfl(range.max_val, m_dt, m_grid, Order);
    m_vmin = range.min_val;
    m_vmax = range.max_val;
    build_profiles();
    // The layer repeats the nearest model cell; the M cells around the padded grid are 0.
    Kokkos::deep_copy(m_space, coef, Real(0));
    launch_for(
        "ksweep::core::set_velocity_padded", policy2(m_space, {0, 0}, {l.rows(), l.NX}), KOKKOS_LAMBDA(int pr, int ix) {
          int const iz = pr / NY, iy = pr - iz * NY;
          int const mz = iz < top ? 0 : (iz - top > mz_n - 1 ? mz_n - 1 : iz - top);
          int const my = iy < front ? 0 : (iy - front > my_n - 1 ? my_n - 1 : iy - front);
          int const mx = ix < width ? 0 : (ix - width > nx - 1 ? nx - 1 : ix - width);
          double const v = static_cast<double>(vp(mz * my_n + my, mx));
          coef(rows.field(iz, iy), ix + M) = static_cast<Real>(v * v * scale);
        });
  } else {
    check_cfl(std::max<double>(range.max_val, m_vmax), m_dt, m_grid, Order);
    launch_for(
        "ksweep::core::set_velocity_model", policy2(m_space, {0, 0}, {nz, nx}), KOKKOS_LAMBDA(int mr, int ix) {
          double const v = static_cast<double>(vp(mr, ix));
          coef(rows.model_field(mr), ix + width + M) = static_cast<Real>(v * v * scale);
        });
  }
  if (m_vp_model.extent(0) == 0)
    m_vp_model =
        field2(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string("ksweep::core::vp")), nz, nx);
  Kokkos::deep_copy(m_space, m_vp_model, vp);
  m_space.fence();
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
template <class T>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::set_model(T const* vp, T const* rho, bool update_layer) {
  static_assert(std::is_same_v<Physics, AcousticVd>, "set_model(vp, rho): variable-density acoustics");
  auto const& l = m_layout;
  int const nx = l.nx;
  long long const n = static_cast<long long>(l.model_rows()) * nx;
  check_velocity(vp, n);
  check_density(rho, n);
  int const N[3] = {l.NZ, l.NY, l.NX}, lo[3] = {l.top, l.front, l.left}, nm[3] = {l.nz, l.ny, l.nx};
  // Padded-grid values [NZ][NY][NX]: the layer repeats the nearest model cell, or keeps its values.
  std::size_t const np = static_cast<std::size_t>(l.NZ) * l.NY * l.NX;
  bool const fresh = update_layer || m_padded_vp.size() != np;
  m_layer_copies_model = fresh;
  if (fresh) {
    m_padded_vp.assign(np, 0.0);
    m_padded_rho.assign(np, 0.0);
  }
  for (int iz = 0; iz < l.NZ; ++iz)
    for (int iy = 0; iy < l.NY; ++iy)
      for (int ix = 0; ix < l.NX; ++ix) {
        int const p[3] = {iz, iy, ix};
        bool model = true;
        std::size_t m = 0;
        for (int a = 0; a < 3; ++a) {
          int const q = p[a] - lo[a];
          model = model && q >= 0 && q < nm[a];
          m = m * nm[a] + static_cast<std::size_t>(std::clamp(q, 0, nm[a] - 1));
        }
        if (!model && !fresh) continue;
        std::size_t const k = (static_cast<std::size_t>(iz) * l.NY + iy) * l.NX + ix;
        m_padded_vp[k] = vp[m];
        m_padded_rho[k] = rho[m];
      }
  // The padded cell of (iz, iy, ix), clamped into the padded grid (the halo repeats its edge).
  auto padded = [&](int iz, int iy, int ix) {
    int const p[3] = {iz, iy, ix};
    std::size_t k = 0;
    for (int a = 0; a < 3; ++a) k = k * N[a] + static_cast<std::size_t>(std::clamp(p[a], 0, N[a] - 1));
    return k;
  };
  double const scale = m_dt * m_dt / (m_grid.dh * m_grid.dh);
  auto ch = Kokkos::create_mirror_view(Kokkos::HostSpace(), m_c);
  Kokkos::deep_copy(ch, Real(0));
  std::vector<typename field2::HostMirror> bh(Dim);
  for (int a = 0; a < Dim; ++a) {
    if (m_bb[a].extent(0) == 0)
      m_bb[a] = field2(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string("ksweep::core::bb")),
                       l.field_rows(), l.NX + 2 * R);
    bh[a] = Kokkos::create_mirror_view(Kokkos::HostSpace(), m_bb[a]);
  }
  int const y0 = Dim == 3 ? -R : 0, y1 = Dim == 3 ? l.NY + R : 1;
  for (int iz = -R; iz < l.NZ + R; ++iz)
    for (int iy = y0; iy < y1; ++iy) {
      int const fr = (iz + R) * (Dim == 3 ? l.NY + 2 * R : 1) + (Dim == 3 ? iy + R : 0);
      for (int ix = -R; ix < l.NX + R; ++ix) {
        for (int a = 0; a < Dim; ++a) {
          int const g = Dim == 3 ? a : 2 * a;  // z, (y,) x
          int q[3] = {iz, iy, ix};
          if (g == 0 && l.free_surface && iz < 0) q[0] = -iz - 1;  // bb_z mirrored above row 0
          int q1[3] = {q[0], q[1], q[2]};
          ++q1[g];
          double const r0 = m_padded_rho[padded(q[0], q[1], q[2])], r1 = m_padded_rho[padded(q1[0], q1[1], q1[2])];
          // Weighted by the axis' (dh / d_a)^2 (exactly 1 on a uniform grid; see acoustic_vd.hpp).
          bh[a](fr, ix + R) = static_cast<Real>(0.5 * (1.0 / r0 + 1.0 / r1) * m_layout.weight[a]);
        }
        if (iz < 0 || iz >= l.NZ || iy < 0 || iy >= l.NY || ix < 0 || ix >= l.NX) continue;
        std::size_t const k = padded(iz, iy, ix);
        double const v = m_padded_vp[k];
        ch(fr, ix + R) = static_cast<Real>(m_padded_rho[k] * v * v * scale);
      }
    }
  // The effective velocity: c times the largest buoyancy of the 2M half-points of the cell's
  // divergence along each axis.
  double veff2 = 0;
  for (int iz = 0; iz < l.NZ; ++iz)
    for (int iy = 0; iy < l.NY; ++iy) {
      int const fr = l.field_row(iz, iy);
      for (int ix = 0; ix < l.NX; ++ix) {
        double bmax = 0;
        for (int a = 0; a < Dim; ++a) {
          std::ptrdiff_t const zstride = Dim == 3 ? l.NY + 2 * R : 1;
          for (int k = -M; k < M; ++k) {
            bool const along_x = a + 1 == Dim;
            std::ptrdiff_t const rr = along_x ? fr : fr + k * (a == 0 ? zstride : 1);
            bmax = std::max(bmax, static_cast<double>(bh[a](rr, along_x ? ix + R + k : ix + R)));
          }
        }
        veff2 = std::max(veff2, static_cast<double>(ch(fr, ix + R)) * bmax);
      }
    }
  double const veff = std::sqrt(veff2) * m_grid.dh / m_dt, limit = Physics::courant_limit(Order, Dim);
  KSWEEP_REQUIRE(veff * m_dt / m_grid.dh <= limit,
                 "unstable time step: the effective velocity sqrt(c bb) dh / dt is "
                     << veff << " m/s, and " << veff << " * dt / dh = " << veff * m_dt / m_grid.dh
                     << " exceeds the CFL limit " << limit << " of order " << Order
                     << " with variable density (dt must be <= " << limit * m_grid.dh / veff << " s)");
  if (fresh) {
    auto const [vlo, vhi] = std::minmax_element(vp, vp + n);
    m_vmin = *vlo;
    m_vmax = *vhi;
    build_profiles();
  }
  Kokkos::deep_copy(m_space, m_c, ch);
  for (int a = 0; a < Dim; ++a) Kokkos::deep_copy(m_space, m_bb[a], bh[a]);
  auto upload_model = [&](T const* h, field2& d, char const* label) {
    if (d.extent(0) == 0)
      d = field2(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string(label)), l.model_rows(), nx);
    auto m = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
    for (int r = 0; r < l.model_rows(); ++r)
      for (int ix = 0; ix < nx; ++ix) m(r, ix) = static_cast<Real>(h[static_cast<std::size_t>(r) * nx + ix]);
    Kokkos::deep_copy(m_space, d, m);
  };
  upload_model(vp, m_vp_model, "ksweep::core::vp");
  upload_model(rho, m_rho_model, "ksweep::core::rho");
  m_space.fence();
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::set_survey(Survey const& survey) {
  check_positions(survey, m_grid, m_pml);  // source_taps / receiver_taps check their reach
  KSWEEP_REQUIRE(survey.n_shots <= m_max_shots, "batch of " << survey.n_shots
                                                            << " shots exceeds the propagator's capacity of "
                                                            << m_max_shots << " shots");
  m_survey = survey;
  auto src = source_taps(survey, m_grid, m_pml);
  m_sources = to_device(src, survey.n_sources, "ksweep::core::src");
  // The time reversal takes the sources out of the model cells only (the layer is not
  // reversed, and the ring the store restores lies in it): taps outside the model become
  // weight-0 taps on the nearest model cell, so that they write no layer cell.
  m_removal = m_sources;
  bool outside = false;
  for (std::size_t j = 0; j < src.cells.size(); ++j) {
    Cell& c = src.cells[j];
    Cell const in{std::clamp(c.z, 0, m_grid.nz - 1), std::clamp(c.x, 0, m_grid.nx - 1),
                  std::clamp(c.y, 0, Dim == 3 ? m_grid.ny - 1 : 0)};
    if (in.z == c.z && in.x == c.x && in.y == c.y) continue;
    c = in;
    src.weights[j] = 0.0;  // points on cells lie in the model: only interpolation taps get here
    outside = true;
  }
  if (outside) m_removal = to_device(src, survey.n_sources, "ksweep::core::src_removal");
  m_receivers = to_device(receiver_taps(survey, m_grid, m_pml), survey.n_receivers, "ksweep::core::rec");
  if (m_link) {
    m_rec_live = live_mask(
        survey.n_receivers, [&](int s, int i) { return survey.live(s, i); }, "rec");
    m_src_live = live_mask(
        survey.n_sources, [&](int s, int i) { return survey.source_live(s, i); }, "src");
  }
  m_space.fence();
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
typename Propagator<Real, Order, ExecSpace, Dimension, Physics>::PointSet
Propagator<Real, Order, ExecSpace, Dimension, Physics>::to_device(core::PointTaps const& t, int n_per_shot,
                                                                  std::string const& label) const {
  int const ns = m_survey.n_shots, per_shot = n_per_shot * t.per_point;
  index2 z(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, label + "_z"), ns, per_shot);
  index2 x(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, label + "_x"), ns, per_shot);
  index2 next(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, label + "_links_next"), ns, per_shot);
  index2 first(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, label + "_links_first"), ns, per_shot);
  auto zh = Kokkos::create_mirror_view(Kokkos::HostSpace(), z);
  auto xh = Kokkos::create_mirror_view(Kokkos::HostSpace(), x);
  auto nh = Kokkos::create_mirror_view(Kokkos::HostSpace(), next);
  auto fh = Kokkos::create_mirror_view(Kokkos::HostSpace(), first);
  bool shared = false;
  for (int s = 0; s < ns; ++s) {
    std::map<std::array<int, 3>, int> last;  // cell -> the latest tap seen in it
    for (int j = 0; j < per_shot; ++j) {
      Cell const& c = t.cells[static_cast<std::size_t>(s) * per_shot + j];
      zh(s, j) = m_layout.field_row(c.z + m_layout.top, c.y + m_layout.front);
      xh(s, j) = c.x + m_layout.left + R;
      nh(s, j) = -1;
      auto const found = last.insert({{c.z, c.y, c.x}, j});
      fh(s, j) = found.second ? 1 : 0;
      if (!found.second) {
        nh(s, found.first->second) = j;
        found.first->second = j;
        shared = true;
      }
    }
  }
  Kokkos::deep_copy(m_space, z, zh);
  Kokkos::deep_copy(m_space, x, xh);
  PointSet set;
  set.z = z;
  set.x = x;
  set.per_shot = n_per_shot;
  set.per_point = t.per_point;
  if (shared) {
    Kokkos::deep_copy(m_space, next, nh);
    Kokkos::deep_copy(m_space, first, fh);
    set.links = {next, first};
  }
  if (!t.weights.empty()) {
    field2 w(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, label + "_w"), ns, per_shot);
    auto wh = Kokkos::create_mirror_view(Kokkos::HostSpace(), w);
    for (int s = 0; s < ns; ++s)
      for (int j = 0; j < per_shot; ++j)
        wh(s, j) = static_cast<Real>(t.weights[static_cast<std::size_t>(s) * per_shot + j]);
    Kokkos::deep_copy(m_space, w, wh);
    set.w = w;
  }
  m_space.fence();  // the host mirrors go out of scope
  return set;
}

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::build_profiles() {
  auto const& l = m_layout;
  double const vmax = m_pml.profile_velocity > 0 ? m_pml.profile_velocity : m_vmax;
  // Variable density: the damping starts M + 1/2 cells into the layer (see cpml_profile).
  double const inset = std::is_same_v<Physics, AcousticVd> ? M + 0.5 : 0.0;
  auto px = cpml_profile(l.nx, l.left, l.right, R, m_grid.step(2), m_dt, vmax, m_pml, false, inset);
  auto pz = cpml_profile(l.nz, l.top, l.bottom, R, m_grid.step(0), m_dt, vmax, m_pml, false, inset);
  auto upload = [&](std::vector<double> const& h, field1& d, char const* label) {
    d = field1(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string(label)), h.size());
    auto m = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
    for (std::size_t i = 0; i < h.size(); ++i) m(i) = static_cast<Real>(h[i]);
    Kokkos::deep_copy(m_space, d, m);
  };
  upload(pz.a, m_prof_a[0], "ksweep::core::az");
  upload(pz.b, m_prof_b[0], "ksweep::core::bz");
  upload(pz.mask, m_prof_mask[0], "ksweep::core::mz");
  upload(px.a, m_prof_a[Dim - 1], "ksweep::core::ax");
  upload(px.b, m_prof_b[Dim - 1], "ksweep::core::bx");
  upload(px.mask, m_prof_mask[Dim - 1], "ksweep::core::mx");
  if constexpr (Dim == 3) {
    auto py = cpml_profile(l.ny, l.front, l.back, R, m_grid.step(1), m_dt, vmax, m_pml, false, inset);
    upload(py.a, m_prof_a[1], "ksweep::core::ay");
    upload(py.b, m_prof_b[1], "ksweep::core::by");
    upload(py.mask, m_prof_mask[1], "ksweep::core::my");
  }
  if constexpr (std::is_same_v<Physics, AcousticVd>) {  // the half-point profiles
    int const n[3] = {l.nz, l.ny, l.nx}, lo[3] = {l.top, l.front, l.left}, hi[3] = {l.bottom, l.back, l.right};
    for (int a = 0; a < Dim; ++a) {
      int const g = Dim == 3 ? a : 2 * a;  // z, (y,) x
      auto h = cpml_profile(n[g], lo[g], hi[g], R, m_grid.step(g), m_dt, vmax, m_pml, true, inset);
      upload(h.a, m_half_a[a], "ksweep::core::half_a");
      upload(h.b, m_half_b[a], "ksweep::core::half_b");
    }
  }
}

}  // namespace ksweep::core
