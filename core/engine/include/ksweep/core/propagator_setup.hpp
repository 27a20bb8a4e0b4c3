#pragma once
/// \file propagator_setup.hpp
/// The set-up of the Propagator (propagator.hpp), defined out of its class: the model (one field
/// per parameter of the physics, checked against its parameter, with the absorbing layer's copy of
/// its edges and the CFL check), the layer's damping profiles, and the survey's points on the device.

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
  // The first cell that is not finite and > 0, in row-major order (as check_parameter finds it).
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
    parameter_error(Physics::parameters[0], first_bad, static_cast<double>(bad()));
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
void Propagator<Real, Order, ExecSpace, Dimension, Physics>::set_host_model(
    std::array<T const*, n_parameters> const& fields, bool update_layer) {
  auto const& l = m_layout;
  int const rows = l.model_rows(), nx = l.nx;
  long long const n = static_cast<long long>(rows) * nx;
  for (int p = 0; p < n_parameters; ++p) {
    KSWEEP_REQUIRE(fields[p], "ksweep::core::Propagator::set_model: no " << Physics::parameters[p].noun << " given");
    check_parameter(Physics::parameters[p], fields[p], n);  // the host values, named as given
  }
  T const* vp = fields[0];
  if constexpr (coefficients_type::on_device) {
    // c = v^2 dt^2 / dh^2 from the velocity on the device (set_velocity's device overload).
    Kokkos::View<Real**, Kokkos::LayoutRight, memory_space> d(
        Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string("ksweep::core::vp_upload")), rows, nx);
    auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
    for (int iz = 0; iz < rows; ++iz)
      for (int ix = 0; ix < nx; ++ix) h(iz, ix) = static_cast<Real>(vp[static_cast<std::size_t>(iz) * nx + ix]);
    Kokkos::deep_copy(m_space, d, h);
    set_velocity(velocity_view(d), update_layer);
  } else {
    // c and the physics' own fields, with the layer's copy of the model's edge and the CFL
    // check, from the physics (coefficients_type::set, on the host).
    auto ch = Kokkos::create_mirror_view(Kokkos::HostSpace(), m_c);
    bool const fresh = m_coef.set(m_space, l, m_grid, m_dt, fields, update_layer, ch);
    m_layer_copies_model = fresh;
    if (fresh) {
      auto const [vlo, vhi] = std::minmax_element(vp, vp + n);
      m_vmin = *vlo;
      m_vmax = *vhi;
      build_profiles();
    }
    Kokkos::deep_copy(m_space, m_c, ch);
    upload_model_field(m_space, vp, rows, nx, m_vp_model, "ksweep::core::vp");
    m_space.fence();
  }
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
  // The last survey's buffers where the sizes match: a batch's launches then name the same
  // buffers as the last batch's, and its runs of steps replay their graphs (step_graph.hpp).
  index2 const z = kept_buffer(m_kept_index, label + "_z", ns, per_shot);
  index2 const x = kept_buffer(m_kept_index, label + "_x", ns, per_shot);
  index2 const next = kept_buffer(m_kept_index, label + "_links_next", ns, per_shot);
  index2 const first = kept_buffer(m_kept_index, label + "_links_first", ns, per_shot);
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
    field2 const w = kept_buffer(m_kept_real, label + "_w", ns, per_shot);
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
  // Where the damping starts in the layer (variable density: M + 1/2 cells in; see cpml_profile).
  double const inset = coefficients_type::profile_inset;
  auto px = cpml_profile(l.nx, l.left, l.right, R, m_grid.step(2), m_dt, vmax, m_pml, false, inset);
  auto pz = cpml_profile(l.nz, l.top, l.bottom, R, m_grid.step(0), m_dt, vmax, m_pml, false, inset);
  upload_profile(m_space, pz.a, m_prof_a[0], "ksweep::core::az");
  upload_profile(m_space, pz.b, m_prof_b[0], "ksweep::core::bz");
  upload_profile(m_space, pz.mask, m_prof_mask[0], "ksweep::core::mz");
  upload_profile(m_space, px.a, m_prof_a[Dim - 1], "ksweep::core::ax");
  upload_profile(m_space, px.b, m_prof_b[Dim - 1], "ksweep::core::bx");
  upload_profile(m_space, px.mask, m_prof_mask[Dim - 1], "ksweep::core::mx");
  if constexpr (Dim == 3) {
    auto py = cpml_profile(l.ny, l.front, l.back, R, m_grid.step(1), m_dt, vmax, m_pml, false, inset);
    upload_profile(m_space, py.a, m_prof_a[1], "ksweep::core::ay");
    upload_profile(m_space, py.b, m_prof_b[1], "ksweep::core::by");
    upload_profile(m_space, py.mask, m_prof_mask[1], "ksweep::core::my");
  }
  m_coef.build_profiles(m_space, l, m_grid, m_dt, vmax, m_pml);  // the physics' own (variable density: half-points)
}

}  // namespace ksweep::core
