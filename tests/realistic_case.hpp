#pragma once
// A gradient case with realistic inputs, for the bit-for-bit comparisons of schedules, backends
// and thread counts: Ricker wavelets sampled over their whole tail (it decays through the fp32
// subnormal range), observed data modelled in a perturbed model with explicit subnormal samples,
// the residual scaled by 1 / (batch nt nr) as `ksweep fwi` scales it, a propagator and store
// with room for more shots than the batch. The counts of subnormal inputs are kept, so that a
// test can check it reaches that range (a case that never gets there cannot fail).

#include <test_utils.hpp>

#include <ksweep/core/gradient.hpp>
#include <ksweep/core/wavelet.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <vector>

namespace ksweep::test {

template <class ExecSpace, int Order, int Dim>
struct RealisticCase {
  using P = core::Propagator<float, Order, ExecSpace, Dim>;
  using E = core::GradientEngine<float, Order, ExecSpace, Dim>;
  // A spread longer than the record: at the last samples the far receivers hold only the
  // stencil's precursors (tiny, not zero), as the shipped example's do (17 km, 1-4 s), and the
  // scaled residuals there are injected as values below the normal range.
  static constexpr int nz = Dim == 2 ? 40 : 20, ny = Dim == 2 ? 0 : 14, nx = Dim == 2 ? 300 : 64;
  static constexpr int nt = Dim == 2 ? 500 : 150, shots = 3, capacity = 5;
  static constexpr double dh = 20.0, dt = 2e-3, freq = Dim == 2 ? 8.0 : 15.0, delay = Dim == 2 ? 0.15 : 0.07;
  int n_rec = 0;
  bool free_surface;
  P prop;
  typename P::wavelet_view w;
  typename P::record_view observed;
  long subnormal_wavelet = 0, subnormal_observed = 0, precursor_samples = 0;

  static core::ModelGrid grid() {
    return Dim == 3 ? core::ModelGrid::volume(nz, ny, nx, dh) : core::ModelGrid(nz, nx, dh);
  }
  static core::PmlConfig pml(bool fs) {
    core::PmlConfig p;
    p.width = Dim == 2 ? 12 : 8;
    p.free_surface = fs;
    return p;
  }
  static std::vector<float> model(bool perturbed) {
    int const rows = nz * (Dim == 3 ? ny : 1);
    std::vector<float> v(static_cast<std::size_t>(rows) * nx);
    for (int r = 0; r < rows; ++r) {
      int const iz = r / (Dim == 3 ? ny : 1), iy = r % (Dim == 3 ? ny : 1);
      for (int ix = 0; ix < nx; ++ix) {
        double vel = 1800.0 + 700.0 * iz / nz + 60.0 * std::sin(0.25 * ix + 0.1 * iy);
        if (perturbed) {
          double const dz = iz - 0.6 * nz, dx = ix - 0.5 * nx, dy = Dim == 3 ? iy - 0.5 * ny : 0.0;
          vel += 150.0 * std::exp(-(dz * dz + dx * dx + dy * dy) / 40.0);
        }
        v[static_cast<std::size_t>(r) * nx + ix] = static_cast<float>(vel);
      }
    }
    return v;
  }
  static core::Survey survey(bool fs) {
    core::Survey s;
    s.n_shots = shots;
    s.n_sources = 1;
    int const rec_lines = Dim == 3 ? 3 : 1, per_line = Dim == 3 ? 16 : 60;
    s.n_receivers = rec_lines * per_line;
    int const z = fs ? 1 : 2;
    for (int i = 0; i < shots; ++i) {
      s.sources.push_back({z, (i + 1) * nx / (shots + 1), Dim == 3 ? ny / 2 + i - 1 : 0});
      // The last three receivers of each line repeat cells of others (their sums into a shared
      // cell must have one order).
      for (int l = 0; l < rec_lines; ++l)
        for (int r = 0; r < per_line; ++r) {
          int const rr = r < per_line - 3 ? r : r - per_line / 2;
          s.receivers.push_back({z + 1, rr * (nx - 1) / (per_line - 1), Dim == 3 ? (l + 1) * ny / (rec_lines + 1) : 0});
        }
    }
    return s;
  }

  explicit RealisticCase(bool fs) : free_surface(fs), prop(ExecSpace(), grid(), pml(fs), dt, capacity) {
    auto const sv = survey(fs);
    n_rec = sv.n_receivers;
    prop.set_survey(sv);
    auto const ricker = core::ricker(freq, delay, dt, nt);
    w = typename P::wavelet_view("w", shots, 1, nt);
    auto wh = Kokkos::create_mirror_view(w);
    for (int s = 0; s < shots; ++s)
      for (int n = 0; n < nt; ++n) {
        float const x = static_cast<float>(ricker[static_cast<std::size_t>(n)] * (1.0 + 0.1 * s));
        wh(s, 0, n) = x;
        subnormal_wavelet += std::fpclassify(x) == FP_SUBNORMAL;
      }
    Kokkos::deep_copy(w, wh);
    // Observed data: the records of the perturbed model, with subnormal samples at early times
    // (where the synthetic records are still exactly zero) and late ones.
    auto const truth = model(true);
    prop.set_schedule(core::Schedule::batched);
    prop.set_velocity(truth.data());
    observed = typename P::record_view("obs", shots, nt, n_rec);
    prop.forward(w, observed);
    auto oh = Kokkos::create_mirror_view(observed);
    Kokkos::deep_copy(oh, observed);
    for (int s = 0; s < shots; ++s)
      for (int r = 0; r < n_rec; r += 3) {
        oh(s, 1 + r % 5, r) = (r % 2 ? 1 : -1) * 3e-39f;
        oh(s, nt - 1 - r % 7, r) = 7e-42f;
      }
    for (std::size_t i = 0; i < oh.span(); ++i) subnormal_observed += std::fpclassify(oh.data()[i]) == FP_SUBNORMAL;
    for (int s = 0; s < shots; ++s)
      for (int r = 0; r < n_rec; ++r) {
        float const x = oh(s, nt - 1, r);
        precursor_samples += x != 0 && std::fabs(x) < 1e-30f;
      }
    Kokkos::deep_copy(observed, oh);
    auto const start = model(false);
    prop.set_velocity(start.data());
  }

  // Records, loss, gradient and illuminations of one run, one after the other.
  std::vector<double> run(core::Schedule s, storage::StorageConfig const& cfg, int chunk, int block_y) {
    prop.set_schedule(s);
    prop.set_block_y(block_y);
    E engine(prop, cfg);
    engine.set_chunk_steps(chunk);
    typename E::images_type img(nz * (Dim == 3 ? ny : 1), nx);
    typename P::record_view syn("syn", shots, nt, n_rec);
    double const scale = 1.0 / (static_cast<double>(shots) * nt * n_rec);  // fwi.loss_norm = "mean"
    double const loss = engine.loss_and_gradient(w, observed, scale, img, syn);
    std::vector<double> out{loss};
    for (auto const& h :
         {host_values(syn), host_values(img.grad), host_values(img.illum_src), host_values(img.illum_rec)})
      out.insert(out.end(), h.begin(), h.end());
    return out;
  }
};

}  // namespace ksweep::test
