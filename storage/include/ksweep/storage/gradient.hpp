#pragma once
/// \file gradient.hpp
/// The FWI gradient of a batch: forward modelling that saves what the adjoint pass needs, then
/// the adjoint pass with imaging.
///
/// Strategies:
///  - "full": every step saves u^{n+1} on the model cells and a stencil radius around them; the
///    backward pass reads u^n back. Exact (the reference).
///  - "boundary": every step saves only the ring of M cells around the model (inside the
///    absorbing layer), where the backward recursion cannot rebuild the wavefield; the last two
///    forward levels stay in the working fields. Backward, the model cells are rebuilt from
///    u^{n-1} = 2 u^n - u^{n+1} + c L u^n + w[n] (time reversal of the leapfrog step without
///    layer terms), then the ring of u^{n-1} is restored. Exact up to the round-off of the
///    reversal.
/// Gradient with respect to the model velocity: dL/dv = sum_n lambda^{n+1} (L u^n) 2 c / v,
/// with the absorbing layer's velocity held fixed.

#include <ksweep/core/propagator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/storage/step_store.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace ksweep::storage {

/// Bytes of each component of a gradient computation.
struct MemoryReport {
  std::string strategy, location, dtype;
  std::size_t boundary_bytes = 0;   ///< saved steps, at `location`
  std::size_t staging_bytes = 0;    ///< device staging for host/disk transfers
  std::size_t wavefield_bytes = 0;  ///< working wavefields and CPML memories (forward + adjoint)
  std::size_t seed_bytes = 0;       ///< the last two forward levels (kept in the working fields)
  std::size_t image_bytes = 0;      ///< gradient and illumination accumulators
  std::size_t observed_bytes = 0;   ///< observed batch
  std::size_t synthetic_bytes = 0;  ///< synthetic records
  std::size_t peak_device_bytes = 0;  ///< measured (host backends: peak resident set of the process)
  std::string to_string() const;
};

/// Gradient, source illumination (sum u^2) and receiver illumination (sum lambda^2) on the
/// model grid, [nz][nx]. Shots (and ranks) are summed in `Real` (double), so that the sum
/// hardly depends on how shots are split over ranks.
template <class MemorySpace, class Real = double>
struct Images {
  Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace> grad, illum_src, illum_rec;
  Images() = default;
  Images(int nz, int nx)
      : grad("ksweep::storage::grad", nz, nx), illum_src("ksweep::storage::illum_src", nz, nx),
        illum_rec("ksweep::storage::illum_rec", nz, nx) {}
};

template <class Real, int Order, class ExecSpace = Kokkos::DefaultExecutionSpace>
class GradientEngine {
 public:
  static constexpr int M = Order / 2;
  using propagator_type = core::Propagator<Real, Order, ExecSpace>;
  using memory_space = typename ExecSpace::memory_space;
  using wavelet_view = typename propagator_type::wavelet_view;
  using record_view = typename propagator_type::record_view;
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;
  using images_type = Images<memory_space, double>;
  using image = Kokkos::View<double**, Kokkos::LayoutRight, memory_space>;

  GradientEngine(propagator_type& prop, StorageConfig const& cfg) : m_prop(prop), m_cfg(cfg) {
    KSWEEP_REQUIRE(cfg.strategy == "full" || cfg.strategy == "boundary",
                   "storage.strategy = \"" << cfg.strategy << "\" is not supported (allowed: full, boundary)");
    auto const& l = prop.layout();
    int const P = l.NX + 2 * M;
    std::vector<int> off;
    int const z0 = l.free_surface ? 0 : l.top - M, z1 = l.top + l.nz + M;
    int const x0 = l.width - M, x1 = l.width + l.nx + M;
    for (int iz = z0; iz < z1; ++iz)
      for (int ix = x0; ix < x1; ++ix) {
        bool const model = iz >= l.top && iz < l.top + l.nz && ix >= l.width && ix < l.width + l.nx;
        if (full() || !model) off.push_back((iz + M) * P + ix + M);
      }
    KSWEEP_REQUIRE(static_cast<long long>(off.size()) * prop.max_shots() < (1LL << 31),
                   "storage: " << off.size() << " saved cells per shot x " << prop.max_shots()
                               << " shots exceeds 2^31 values per step; use fewer shots per batch");
    m_n_ring = static_cast<int>(off.size());
    m_ring_div = FastDivisor(std::max(m_n_ring, 1));
    m_offsets = Kokkos::View<int*, memory_space>(std::string("ksweep::storage::ring_offsets"), off.size());
    auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), m_offsets);
    for (std::size_t i = 0; i < off.size(); ++i) h(i) = off[i];
    Kokkos::deep_copy(m_offsets, h);
    m_grad_c = image(std::string("ksweep::storage::grad_c"), l.nz, l.nx);
    m_isrc = image(std::string("ksweep::storage::isrc"), l.nz, l.nx);
    m_irec = image(std::string("ksweep::storage::irec"), l.nz, l.nx);
  }

  bool full() const { return m_cfg.strategy == "full"; }
  /// Cells saved per shot and step.
  int ring_cells() const { return m_n_ring; }
  StorageConfig const& config() const { return m_cfg; }

  /// Forward modelling of the current batch that saves what the backward pass needs. Three
  /// launches per step: point work, stencil, and the ring gathered straight into the encoder.
  void forward(wavelet_view const& w, record_view const& synthetic) {
    auto& p = m_prop;
    int const nt = static_cast<int>(w.extent(2)), S = p.n_shots();
    m_nt = nt;
    m_store.reset();
    m_store = std::make_unique<StepStore<Real, ExecSpace>>(p.space(), m_cfg, static_cast<std::size_t>(S) * m_n_ring, nt);
    p.forward_reset();
    for (int n = 0; n < nt; ++n) {
      p.forward_step(n, w, synthetic);
      m_store->put_from(n, ring_values(p.forward_state().u[p.forward_state().cur]));  // u^{n+1}
    }
    p.forward_finish(synthetic);
    m_store->finish_writes();
    m_peak = std::max(m_peak, core::peak_memory_bytes());
  }

  /// Backward pass for the batch run by forward(): `residual` = dL/d(synthetic) [shot][nt][rec].
  /// Adds the batch's gradient (w.r.t. the model velocity) and illuminations to `out`. Three
  /// launches per step: the point work of both wavefields with the decoded ring, imaging with
  /// reconstruction, and the adjoint stencil.
  void backward(wavelet_view const& w, record_view const& residual, images_type const& out) {
    auto& p = m_prop;
    auto const& l = p.layout();
    int const nt = m_nt, S = p.n_shots();
    KSWEEP_REQUIRE(m_store, "ksweep::storage::GradientEngine::backward: forward() must run first");
    KSWEEP_REQUIRE(static_cast<int>(residual.extent(1)) == nt,
                   "residual has " << residual.extent(1) << " time samples, the forward run had " << nt);
    auto const space = p.space();
    Kokkos::deep_copy(space, m_grad_c, 0.0);
    Kokkos::deep_copy(space, m_isrc, 0.0);
    Kokkos::deep_copy(space, m_irec, 0.0);
    p.adjoint_start(residual);  // lambda^{nt}
    auto& fs = p.forward_state();
    auto& as = p.adjoint_state();
    typename propagator_type::wavelet_view no_wavelets;
    int const n_src = S * p.survey().n_sources, n_ring = S * m_n_ring;
    for (int n = nt - 1; n >= 0; --n) {
      // Fields on entry: lambda^{n+1} = as.u[cur]; boundary: u^{n+1} = fs.u[cur], u^n = fs.u[1 - cur].
      auto const adj = p.adjoint_points(n, residual, no_wavelets);
      if (full()) {
        // u^n from the store (u^0 = 0 contributes nothing) into fs.u[1 - cur].
        if (n >= 1) {
          RingValues<Real, memory_space> sink{fs.u[1 - fs.cur], m_offsets, m_ring_div};
          launch_fused(adj, core::NoWork{}, 0, m_store->decoder(m_store->fetch(n - 1), sink), n_ring);
          imaging(fs.u[1 - fs.cur], fs.u[fs.cur], as.u[as.cur], false, S);
        } else {
          core::launch_points(space, "ksweep::storage::adjoint_points", adj.f, adj.count);
        }
      } else if (n >= 1) {
        // Rebuild u^{n-1} into fs.u[cur] (which holds u^{n+1}): the sources w[n] are taken
        // out of u^{n+1} first (the forward step added them through "- u^{n-1}"), the ring of
        // u^{n-1} comes from the store, the model cells from the reversed step.
        core::InjectPoints<Real, memory_space> sources{fs.u[fs.cur], w, p.source_z(), p.source_x(), n,
                                                       p.survey().n_sources, false, Real(-1)};
        RingValues<Real, memory_space> sink{fs.u[fs.cur], m_offsets, m_ring_div};
        if (n >= 2) {
          launch_fused(adj, sources, n_src, m_store->decoder(m_store->fetch(n - 2), sink), n_ring);
        } else {
          launch_fused(adj, sources, n_src, ZeroValues<RingValues<Real, memory_space>>{sink}, n_ring);  // u^0 = 0
        }
        imaging(fs.u[1 - fs.cur], fs.u[fs.cur], as.u[as.cur], true, S);
        fs.cur = 1 - fs.cur;
      } else {
        core::launch_points(space, "ksweep::storage::adjoint_points", adj.f, adj.count);
        imaging(fs.u[1 - fs.cur], fs.u[fs.cur], as.u[as.cur], false, S);
      }
      p.advance_adjoint();  // lambda^n
    }
    // Convert d/dc to d/dv: dc/dv = 2 c / v.
    auto g = out.grad, is = out.illum_src, ir = out.illum_rec;
    auto gc = m_grad_c, isc = m_isrc, irc = m_irec;
    auto c = p.c();
    auto vp = p.vp_model();
    int const top = l.top, wd = l.width;
    Kokkos::parallel_for(
        "ksweep::storage::scale_images",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(space, {0, 0},
                                                                                                          {l.nz, l.nx}),
        KOKKOS_LAMBDA(int iz, int ix) {
          g(iz, ix) += gc(iz, ix) * 2.0 * static_cast<double>(c(iz + top + M, ix + wd + M)) / static_cast<double>(vp(iz, ix));
          is(iz, ix) += isc(iz, ix);
          ir(iz, ix) += irc(iz, ix);
        });
    space.fence();
    m_store.reset();
    m_peak = std::max(m_peak, core::peak_memory_bytes());
  }

  /// Loss scale * sum (synthetic - observed)^2 of the batch; its gradient is added to `out`.
  /// `synthetic` receives the batch's records.
  double loss_and_gradient(wavelet_view const& w, record_view const& observed, double scale, images_type const& out,
                           record_view const& synthetic) {
    forward(w, synthetic);
    record_view residual(Kokkos::view_alloc(m_prop.space(), Kokkos::WithoutInitializing, std::string("ksweep::storage::residual")),
                         synthetic.extent(0), synthetic.extent(1), synthetic.extent(2));
    double loss = 0;
    Real const two_scale = static_cast<Real>(2 * scale);
    auto syn = synthetic;
    auto obs = observed;
    int const nt = static_cast<int>(synthetic.extent(1)), nr = static_cast<int>(synthetic.extent(2));
    Kokkos::parallel_reduce(
        "ksweep::storage::residual",
        Kokkos::RangePolicy<ExecSpace>(m_prop.space(), 0, static_cast<int>(synthetic.extent(0)) * nt * nr),
        KOKKOS_LAMBDA(int i, double& acc) {
          int const s = i / (nt * nr), t = (i / nr) % nt, r = i % nr;
          Real const d = syn(s, t, r) - obs(s, t, r);
          residual(s, t, r) = two_scale * d;
          acc += static_cast<double>(d) * static_cast<double>(d);
        },
        loss);
    backward(w, residual, out);
    return scale * loss;
  }

  /// Memory of the last run (boundary bytes of the last forward) for `observed` and
  /// `synthetic` record sizes in bytes.
  MemoryReport memory_report(std::size_t observed_bytes, std::size_t synthetic_bytes) const {
    MemoryReport r;
    r.strategy = m_cfg.strategy;
    r.location = to_string(m_cfg.location);
    r.dtype = to_string(m_cfg.dtype);
    std::size_t const values = static_cast<std::size_t>(m_prop.n_shots()) * m_n_ring;
    std::size_t const step = encoded_bytes(m_cfg.dtype, values, sizeof(Real));
    r.boundary_bytes = step * static_cast<std::size_t>(m_nt);
    r.staging_bytes = m_cfg.location == Location::device
                          ? 0
                          : 2 * step * static_cast<std::size_t>(std::min(m_cfg.transfer_interval, std::max(m_nt, 1)));
    auto const& l = m_prop.layout();
    std::size_t const level = static_cast<std::size_t>(m_prop.max_shots()) * (l.NZ + 2 * M) * (l.NX + 2 * M) * sizeof(Real);
    r.seed_bytes = 2 * level;
    r.wavefield_bytes = 2 * m_prop.state_bytes() - r.seed_bytes;
    r.image_bytes = 6 * static_cast<std::size_t>(l.nz) * l.nx * sizeof(double);
    r.observed_bytes = observed_bytes;
    r.synthetic_bytes = synthetic_bytes;
    r.peak_device_bytes = m_peak;
    return r;
  }

 private:
  // The saved cells of each shot's wavefield `u`, as a codec value source or sink.
  RingValues<Real, memory_space> ring_values(field3 const& u) const { return {u, m_offsets, m_ring_div}; }

  // One launch: the adjoint point work, then `first` over n_first indices, then `second`
  // over n_second indices. All three write disjoint cells (adjoint wavefield; source cells of
  // the forward wavefield; ring cells of the forward wavefield).
  template <class First, class Second>
  void launch_fused(typename propagator_type::PointWork const& adj, First const& first, int n_first, Second const& second,
                    int n_second) const {
    using inner = core::Concat<First, Second>;
    core::Concat<typename propagator_type::points_functor, inner> f{adj.f, inner{first, second, n_first}, adj.count};
    core::launch_points(m_prop.space(), "ksweep::storage::backward_points", f, adj.count + n_first + n_second);
  }
  void imaging(field3 const& u0, field3 const& u1, field3 const& lambda, bool reconstruct, int S) {
    auto const& l = m_prop.layout();
    core::AcousticImaging<Real, Order, memory_space> f{u0, lambda, u1, m_prop.c(), m_grad_c, m_isrc, m_irec,
                                                       l.nz, l.nx, l.top, l.width, S, l.free_surface, reconstruct};
    core::launch_cells(m_prop.space(), reconstruct ? "ksweep::storage::image_and_rebuild" : "ksweep::storage::image", f,
                       l.nz, l.nx);
  }

  propagator_type& m_prop;
  StorageConfig m_cfg;
  int m_n_ring = 0;
  FastDivisor m_ring_div;  // index -> (shot, ring cell) in the codec's ring sources and sinks
  int m_nt = 0;
  std::size_t m_peak = 0;
  Kokkos::View<int*, memory_space> m_offsets;
  image m_grad_c, m_isrc, m_irec;  // d/dc and illuminations of a batch, summed over shots
  std::unique_ptr<StepStore<Real, ExecSpace>> m_store;
};

}  // namespace ksweep::storage
