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
/// The model cells within the physics' forward_reach of the layer (constant density: M) have a
/// layer term in their step (Dx psi, see acoustic_kernels.hpp) that neither the imaging nor the
/// reversal can compute from u: every step saves it (in full precision, on the device) for
/// both strategies, and the backward pass adds it to those cells' images and rebuilt values
/// (the cells and their functors: layer_terms.hpp).
/// A run from a start state (forward(..., true) after Propagator::set_forward_state): u^0 is not
/// zero, so its saved cells (the ring, or the whole box when full) are kept at the start, exact,
/// beside the store, and the layer's chain rule starts from the state's u^0 and u^{-1}; step 0's
/// term then enters the images under both strategies.
/// Gradient with respect to the model velocity: dL/dv = sum_n lambda^{n+1} (L u^n) 2 c / v,
/// with the absorbing layer's velocity held fixed; with variable density (AcousticVd) also with
/// respect to the density (see scale_images), the layer's density held fixed.
/// The layer's chain rule (set_layer_chain): when the layer's velocity is the propagator's copy
/// of the model's edge cells (Propagator::layer_copies_model), each layer cell's c is its edge
/// cell's, and dL/dv at an edge cell gains sum over its layer cells j of
/// (2 / (v c_j)) sum_n mu_j^{n+1} D_j^n, with D_j^n = c_j T_j^n = u_j^{n+1} - 2 u_j^n + u_j^{n-1}
/// minus the sources' taps in j (the layer step is u^{n+1} = 2 u^n - u^{n-1} + c T, and T does
/// not depend on c). D of every layer cell is saved every forward step (layer cells x shots x
/// nt values of Real on the device) and folded into the edge cells after the backward pass, in
/// the layer cells' row-major order. The damping profiles' velocity is a constant (pml_velocity,
/// or the maximum of the model, whose derivative is not taken); variable density: the layer's
/// density stays fixed (its velocity's chain rule is applied).

#include <ksweep/core/layer_terms.hpp>
#include <ksweep/core/memory_report.hpp>
#include <ksweep/core/profiling.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/core/spare_buffer.hpp>
#include <ksweep/storage/step_store.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ksweep::core {

/// Gradients (one per parameter of the physics, grads [parameter][nz][nx]; grad is the first,
/// vp), source illumination (sum u^2) and receiver illumination (sum lambda^2) on the model
/// grid, [nz][nx] (3D: [nz ny][nx], constructed with rows = nz ny), summed over shots in `Real` (double).
/// GradientEngine::accumulate adds shots one by one in batch order, so a sum over a batch split over ranks or threads
/// is the same, bit for bit, as over the whole batch at once (see comm::Communicator::sum_in_rank_order).
template <class MemorySpace, class Real = double>
struct Images {
  using image = Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace>;
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> grads;
  image grad, illum_src, illum_rec;
  Images() = default;
  Images(int nz, int nx, int n_params = 1)
      : grads("ksweep::core::grad", n_params, nz, nx),
        grad(Kokkos::subview(grads, 0, Kokkos::ALL, Kokkos::ALL)),
        illum_src("ksweep::core::illum_src", nz, nx),
        illum_rec("ksweep::core::illum_rec", nz, nx) {}
  /// Zeroed images allocated and initialised on the instance `space`.
  template <class ExecSpace>
  Images(ExecSpace const& space, int nz, int nx, int n_params = 1)
      : grads(Kokkos::view_alloc(space, std::string("ksweep::core::grad")), n_params, nz, nx),
        grad(Kokkos::subview(grads, 0, Kokkos::ALL, Kokkos::ALL)),
        illum_src(Kokkos::view_alloc(space, std::string("ksweep::core::illum_src")), nz, nx),
        illum_rec(Kokkos::view_alloc(space, std::string("ksweep::core::illum_rec")), nz, nx) {}
  int n_params() const { return static_cast<int>(grads.extent(0)); }
  /// The gradient with respect to parameter p (the physics' order: vp, rho).
  image gradient(int p) const { return Kokkos::subview(grads, p, Kokkos::ALL, Kokkos::ALL); }
};

/// The gradient of a batch for the propagator it is given, on the propagator's instance.
/// Synchronisation: forward(), backward(), compute() and loss_and_gradient() complete an
/// operation and fence the instance before they return; accumulate() only launches (its sums
/// are ordered before any later work on the instance).
template <class Real, int Order, class ExecSpace = Kokkos::DefaultExecutionSpace, int Dimension = 2,
          class Physics = Acoustic>
class GradientEngine {
 public:
  static constexpr int M = Order / 2, Dim = Dimension;
  using propagator_type = core::Propagator<Real, Order, ExecSpace, Dim, Physics>;
  /// The halo of the fields and the width of the saved ring (the reach of the physics' stencil).
  static constexpr int R = propagator_type::R;
  static constexpr int n_params = static_cast<int>(Physics::parameters.size());
  using imaging_type = typename Physics::template imaging<Real, Order, typename ExecSpace::memory_space, Dimension>;
  using body_type = typename Physics::template cell<Real, Order, Dimension>;
  using coefficients_type = typename propagator_type::coefficients_type;
  using memory_space = typename ExecSpace::memory_space;
  using wavelet_view = typename propagator_type::wavelet_view;
  using record_view = typename propagator_type::record_view;
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;
  using images_type = Images<memory_space, double>;
  using image = Kokkos::View<double**, Kokkos::LayoutRight, memory_space>;
  using shot_images = Kokkos::View<double***, Kokkos::LayoutRight, memory_space>;  // [shot][model row][nx]
  using model_field = std::decay_t<decltype(std::declval<propagator_type const&>().c())>;
  using terms_view = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;  // [step][shot][layer-term cell]
  using strip_view = typename propagator_type::field4;

  using layer_view = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;  // [step or slot][shot][layer cell]
  using layer_acc = Kokkos::View<double**, Kokkos::LayoutRight, memory_space>;  // [shot][layer cell]
  using index_view = Kokkos::View<int const*, memory_space>;
  using SaveLayerTerms = core::SaveLayerTerms<Real, memory_space, Dim>;
  using ApplyLayerTerms = core::ApplyLayerTerms<Real, memory_space>;
  using LayerSave = core::LayerSave<Real, memory_space>;
  using LayerSources = core::LayerSources<Real, memory_space>;
  using LayerChain = core::LayerChain<Real, memory_space>;
  using LayerFold = core::LayerFold<Real, memory_space>;

  ~GradientEngine() { LayerSpare::give(std::move(m_layer_store)); }
  GradientEngine(GradientEngine const&) = delete;
  GradientEngine& operator=(GradientEngine const&) = delete;

  GradientEngine(propagator_type& prop, storage::StorageConfig const& cfg)
      : m_prop(prop), m_cfg(cfg), m_layer_chain(cfg.layer_chain) {
    auto const& l = prop.layout();
    // The saved cells and, for codecs with a scale per block, the padding that keeps a block
    // within one shot and one tile of the model (core::ring_layout, storage::RingValues).
    std::vector<int> const off = ring_layout(l, full(), cfg.dtype);
    m_n_ring = static_cast<int>(std::count_if(off.begin(), off.end(), [](int o) { return o >= 0; }));
    KSWEEP_REQUIRE(static_cast<long long>(m_n_ring) == core::ring_cells(l, full()),
                   "ksweep::core::GradientEngine: " << m_n_ring << " saved cells, ring_cells says "
                                                    << core::ring_cells(l, full()));
    m_stride = static_cast<int>(off.size());
    KSWEEP_REQUIRE(static_cast<long long>(m_stride) == core::ring_stride(l, full(), cfg.dtype),
                   "ksweep::core::GradientEngine: " << m_stride << " saved values, ring_stride says "
                                                    << core::ring_stride(l, full(), cfg.dtype));
    KSWEEP_REQUIRE(static_cast<long long>(m_stride) * prop.max_shots() < (1LL << 31),
                   "storage: " << m_stride << " saved values per shot x " << prop.max_shots()
                               << " shots exceeds 2^31 values per step; use fewer shots per batch");
    m_ring_div = storage::FastDivisor(std::max(m_stride, 1));
    auto const space = prop.space();
    m_pad = Kokkos::View<Real**, Kokkos::LayoutRight, memory_space>(
        Kokkos::view_alloc(space, std::string("ksweep::core::ring_pad")), prop.max_shots(), m_stride - m_n_ring);
    m_offsets = Kokkos::View<int*, memory_space>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::core::ring_offsets")), off.size());
    Kokkos::View<int const*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> const h(off.data(),
                                                                                                 off.size());
    Kokkos::deep_copy(space, m_offsets, h);
    space.fence();
    int const S = prop.max_shots();
    using Kokkos::view_alloc;
    using Kokkos::WithoutInitializing;
    int const rows = l.model_rows();
    m_grad_c = shot_images(view_alloc(space, WithoutInitializing, std::string("ksweep::core::grad_c")), S, rows, l.nx);
    m_isrc = shot_images(view_alloc(space, WithoutInitializing, std::string("ksweep::core::isrc")), S, rows, l.nx);
    m_irec = shot_images(view_alloc(space, WithoutInitializing, std::string("ksweep::core::irec")), S, rows, l.nx);
    for (int p = 1; p < n_params; ++p)
      m_grad_more[p - 1] = shot_images(
          view_alloc(space, WithoutInitializing, std::string("ksweep::core::grad_") + Physics::parameters[p].name), S,
          rows, l.nx);
    m_misfit = Kokkos::View<double**, Kokkos::LayoutRight, memory_space>(
        view_alloc(space, WithoutInitializing, std::string("ksweep::core::misfit")), S, 0);
    // The model cells with layer terms in their step (see LayerTermCells).
    auto const lt = layer_term_cells<Dim>(l, body_type::forward_reach, R, S);
    m_n_terms = lt.size();
    KSWEEP_REQUIRE(m_n_terms == core::layer_term_cells(l, body_type::forward_reach),
                   "ksweep::core::GradientEngine: " << m_n_terms << " layer-term cells, layer_term_cells says "
                                                    << core::layer_term_cells(l, body_type::forward_reach));
    m_term_axis = upload(space, lt.axis, "ksweep::core::term_axis");
    m_term_strip = upload(space, lt.strip, "ksweep::core::term_strip");
    m_term_model = upload(space, lt.model, "ksweep::core::term_model");
    m_term_field = upload(space, lt.field, "ksweep::core::term_field");
    space.fence();
  }

  bool full() const { return m_cfg.strategy == storage::Strategy::full; }

  /// The chain rule of the absorbing layer's copy of the model's edge cells (see the file
  /// comment): applied by the next forward()/backward() when `on` and the propagator's layer is
  /// that copy (Propagator::layer_copies_model), at the cost of layer cells x shots x nt values
  /// of Real on the device. The default is the configuration's (StorageConfig::layer_chain).
  void set_layer_chain(bool on) { m_layer_chain = on; }
  bool layer_chain() const { return m_layer_chain; }
  /// What the receiver image (Images::illum_rec) of the next backward() holds: the receiver
  /// illumination sum_n lambda^{n+1} squared (false, the default), or (true) the zero-lag
  /// cross-correlation of the source and adjoint wavefields sum_n u^n lambda^{n+1} (RTM's plain
  /// cross-correlation image condition; lambda^{n+1} is the adjoint level the gradient pairs
  /// with u^n).
  void set_cross_correlation(bool on) { m_xcorr = on; }
  /// Whether the next backward() sums the illuminations (Images::illum_src and illum_rec; true,
  /// the default). Off, its images leave them zero and its imaging reads and writes 24 bytes per
  /// model cell and step fewer (of 48 for the three images in double): a gradient that is not
  /// preconditioned and not shown needs none. The cross-correlation (set_cross_correlation) is
  /// summed whatever this says. The gradients are the same bits either way.
  void set_illuminations(bool on) { m_illum = on; }
  bool illuminations() const { return m_illum || m_xcorr; }

  /// A look into backward()'s reverse sweep: `watch(n)` is called on the host once the adjoint
  /// level lambda^n is the propagator's newest and the images hold the steps nt - 1 down to n
  /// (n = nt - 1, ..., 0), the instance not fenced: a watch that reads fences it
  /// (Propagator::get_adjoint_state, accumulate_so_far do). It may change the adjoint levels
  /// (Propagator::set_adjoint_state): the sweep goes on from them. `steps`: the steps n it is
  /// called at (empty: every step). The `shots` schedule ends a chunk of steps at each of them
  /// (the same bits: the per-step work is the same). Empty `watch`: none.
  void set_reverse_watch(std::function<void(int)> watch, std::vector<int> steps = {}) {
    m_watch = std::move(watch);
    std::sort(steps.begin(), steps.end());
    m_watch_steps = std::move(steps);
  }
  bool cross_correlation() const { return m_xcorr; }
  /// Cells saved per shot and step.
  int ring_cells() const { return m_n_ring; }
  storage::StorageConfig const& config() const { return m_cfg; }

  /// Forward modelling of the current batch that saves what the backward pass needs. Three
  /// launches per step: point work, stencil, and the ring gathered straight into the encoder;
  /// a fourth saves the layer terms of the model cells next to the layer (constant density).
  /// From rest, or (`from_state`) from the state the propagator was given
  /// (Propagator::set_forward_state): u^0, u^{-1} and the layer's memories. The saved steps'
  /// allocation (device or host storage) is kept for the next forward() of the same shots and
  /// steps, which writes over it: no fresh memory per run.
  void forward(wavelet_view const& w, record_view const& synthetic, bool from_state = false) {
    ScopedRegion region("ksweep::core::gradient::forward");
    auto& p = m_prop;
    int const nt = static_cast<int>(w.extent(2)), S = p.n_shots();
    m_nt = nt;
    m_saved = false;
    std::size_t const values = static_cast<std::size_t>(S) * m_stride;
    if (m_store && m_store->values_per_step() == values && m_store->steps() == nt) {
      m_store->rewind();  // the last run's allocations: no fresh pages to fault in, no device malloc
    } else {
      m_store.reset();
      m_store = std::make_unique<storage::StepStore<Real, ExecSpace>>(p.space(), m_cfg, values, nt);
    }
    m_from_state = from_state;
    if (from_state) save_start();
    else p.forward_reset();
    prepare_layer_chain(nt);
    if (m_n_terms > 0 && static_cast<int>(m_terms.extent(0)) != nt)
      m_terms = terms_view(
          Kokkos::view_alloc(p.space(), Kokkos::WithoutInitializing, std::string("ksweep::core::layer_terms")), nt,
          p.max_shots(), m_n_terms);
    if (p.runs_shots()) forward_shots(w, synthetic, nt);
    else if (graphs_fit()) p.run_steps([&] { forward_batched(w, synthetic, nt); });
    else forward_batched(w, synthetic, nt);
    p.forward_finish(synthetic);
    p.gather_records(synthetic);
    m_store->finish_writes();
    m_saved = true;
    p.space().fence();
    m_peak = std::max(m_peak, core::peak_memory_bytes());
  }

  /// Backward pass for the batch run by forward(), then accumulate(out).
  void backward(wavelet_view const& w, record_view const& residual, images_type const& out,
                AdjointEnd<Real> const& end = {}) {
    backward(w, residual, end);
    accumulate(out);
  }

  /// Backward pass for the batch run by forward(): `residual` = dL/d(synthetic) [shot][nt][rec].
  /// Computes each shot's gradient (w.r.t. the model velocity) and illuminations, kept until
  /// the next batch (accumulate() adds them up). Three launches per step: the point work of
  /// both wavefields with the decoded ring, imaging with reconstruction, and the adjoint stencil;
  /// a fourth adds the layer terms of the model cells next to the layer (constant density).
  /// `end`: the gradient of the loss with respect to the run's end state as well (AdjointEnd),
  /// where the sweep starts. `wavelet_grad` (empty: none) [shot][source][nt]: the wavelets'
  /// gradient too, sampled from the same sweep (the bits of Propagator::adjoint's), so the
  /// gradient of both the model and the wavelets takes one reverse pass.
  void backward(wavelet_view const& w, record_view const& residual, AdjointEnd<Real> const& end = {},
                wavelet_view const& wavelet_grad = {}) {
    ScopedRegion region("ksweep::core::gradient::backward");
    auto& p = m_prop;
    int const nt = m_nt, S = p.n_shots();
    KSWEEP_REQUIRE(m_saved, "ksweep::core::GradientEngine::backward: forward() must run first");
    m_saved = false;  // one backward() per forward()
    KSWEEP_REQUIRE(static_cast<int>(residual.extent(1)) == nt,
                   "residual has " << residual.extent(1) << " time samples, the forward run had " << nt);
    KSWEEP_REQUIRE(wavelet_grad.extent(0) == 0 ||
                       (static_cast<int>(wavelet_grad.extent(0)) == S && wavelet_grad.extent(1) == w.extent(1) &&
                        static_cast<int>(wavelet_grad.extent(2)) == nt),
                   "the wavelet gradient is [" << wavelet_grad.extent(0) << "][" << wavelet_grad.extent(1) << "]["
                                               << wavelet_grad.extent(2) << "], the wavelets [" << S << "]["
                                               << w.extent(1) << "][" << nt << "]");
    auto const space = p.space();
    Kokkos::deep_copy(space, m_grad_c, 0.0);
    Kokkos::deep_copy(space, m_isrc, 0.0);
    Kokkos::deep_copy(space, m_irec, 0.0);
    for (auto const& g : m_grad_more) Kokkos::deep_copy(space, g, 0.0);
    if (m_chain_run) Kokkos::deep_copy(space, m_layer_acc, 0.0);
    m_shots = S;
    p.adjoint_start(residual, end);  // lambda^{nt}
    if (p.runs_shots()) backward_shots(w, residual, wavelet_grad);
    else if (graphs_fit() && !m_watch) p.run_steps([&] { backward_batched(w, residual, wavelet_grad); });
    else backward_batched(w, residual, wavelet_grad);
    if (wavelet_grad.extent(0) != 0) p.gather_wavelets(wavelet_grad);
    // The adjoint field is mu = c lambda: the images hold sum mu L u and sum mu^2. With
    // dc/dv = 2 c / v: dL/dv = sum lambda L u 2 c / v = (2 / v) sum mu L u, and
    // sum lambda^2 = (sum mu^2) / c^2 (c is fixed in time). Per shot.
    finish_images(S);
    space.fence();
    // The saved steps stay allocated for the next forward() of the same size (an inversion's
    // next iteration, the next batch), except on disk: its file goes with the run.
    if (m_cfg.location == storage::Location::disk) m_store.reset();
    m_peak = std::max(m_peak, core::peak_memory_bytes());
  }

  /// From a reverse watch (set_reverse_watch): adds to `out`, as accumulate() does, the images of
  /// the reverse steps done so far, finished as backward() finishes them at its end (the chain
  /// rules), on copies: the sweep's own images go on as they are. At n = 0 these are the bits
  /// that backward() and accumulate() give. Fences the instance.
  void accumulate_so_far(images_type const& out) {
    auto const space = m_prop.space();
    auto copy = [&](shot_images const& v) {
      shot_images c(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, v.label() + "_so_far"), v.extent(0),
                    v.extent(1), v.extent(2));
      Kokkos::deep_copy(space, c, v);
      return c;
    };
    auto const grad = m_grad_c, isrc = m_isrc, irec = m_irec;
    auto const more = m_grad_more;
    m_grad_c = copy(grad);
    m_isrc = copy(isrc);
    m_irec = copy(irec);
    for (auto& g : m_grad_more) g = copy(g);
    finish_images(m_shots);
    accumulate(out);
    space.fence();
    m_grad_c = grad;
    m_isrc = isrc;
    m_irec = irec;
    m_grad_more = more;
  }

  /// Adds the images of the last batch's shots to `out`, one shot after the other in batch
  /// order: out = (((out + shot 0) + shot 1) + ...). The same shots added to the same `out`
  /// give the same bits whatever the split of a batch over engines, ranks or threads.
  /// Asynchronous on the propagator's instance (a piece of an operation, see the class comment).
  void accumulate(images_type const& out) const {
    auto g = out.grad, is = out.illum_src, ir = out.illum_rec;
    auto gc = m_grad_c, isc = m_isrc, irc = m_irec;
    int const S = m_shots;
    // One parameter: `grad` alone may be set (a caller's array, no `grads` beside it).
    KSWEEP_REQUIRE(n_params == 1 || out.n_params() == n_params, "ksweep::core::GradientEngine::accumulate: images of "
                                                                    << out.n_params() << " parameters, the physics "
                                                                    << Physics::name << " has " << n_params);
    for (int p = 1; p < n_params; ++p) {
      auto gp = out.gradient(p);
      auto gps = m_grad_more[p - 1];
      launch_for(
          "ksweep::core::accumulate_parameter_image",
          Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(
              m_prop.space(), {0, 0}, {static_cast<int>(gp.extent(0)), static_cast<int>(gp.extent(1))}),
          KOKKOS_LAMBDA(int iz, int ix) {
            double a = gp(iz, ix);
            for (int s = 0; s < S; ++s) a += gps(s, iz, ix);
            gp(iz, ix) = a;
          });
    }
    launch_for(
        "ksweep::core::accumulate_images",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(
            m_prop.space(), {0, 0}, {static_cast<int>(g.extent(0)), static_cast<int>(g.extent(1))}),
        KOKKOS_LAMBDA(int iz, int ix) {
          double a = g(iz, ix), b = is(iz, ix), d = ir(iz, ix);
          for (int s = 0; s < S; ++s) {
            a += gc(s, iz, ix);
            b += isc(s, iz, ix);
            d += irc(s, iz, ix);
          }
          g(iz, ix) = a;
          is(iz, ix) = b;
          ir(iz, ix) = d;
        });
  }

  /// Per-shot images of the last batch, [shot][model row][nx] (gradient w.r.t. velocity, and the
  /// source and receiver illuminations); the first n_shots() entries are valid.
  shot_images const& shot_gradient() const { return m_grad_c; }
  shot_images const& shot_illum_src() const { return m_isrc; }
  shot_images const& shot_illum_rec() const { return m_irec; }
  /// The per-shot gradients with respect to parameter p >= 1 of the physics (variable density:
  /// 1, the density).
  shot_images const& shot_gradient(int p) const { return m_grad_more[p - 1]; }

  /// The misfit of each shot of the last batch (scale included), in batch order.
  std::vector<double> const& shot_losses() const { return m_shot_loss; }

  /// Forward and backward passes of the batch: per-shot misfits scale * sum (synthetic -
  /// observed)^2 (shot_losses()) and per-shot images, nothing added anywhere. `synthetic`
  /// receives the batch's records. Each shot's misfit is summed in a fixed order (receivers,
  /// then time samples), so it does not depend on the backend's threads either.
  void compute(wavelet_view const& w, record_view const& observed, double scale, record_view const& synthetic) {
    forward(w, synthetic);
    int const S = static_cast<int>(synthetic.extent(0)), nt = static_cast<int>(synthetic.extent(1)),
              nr = static_cast<int>(synthetic.extent(2));
    auto const space = m_prop.space();
    record_view residual(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::core::residual")),
                         S, nt, nr);
    if (static_cast<int>(m_misfit.extent(1)) != nt)
      m_misfit = Kokkos::View<double**, Kokkos::LayoutRight, memory_space>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::core::misfit")),
          m_prop.max_shots(), nt);
    Real const two_scale = static_cast<Real>(2 * scale);
    auto syn = synthetic;
    auto obs = observed;
    auto mis = m_misfit;
    launch_for(
        "ksweep::core::residual",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(space, {0, 0},
                                                                                                          {S, nt}),
        KOKKOS_LAMBDA(int s, int t) {
          double acc = 0;
          for (int r = 0; r < nr; ++r) {
            Real const d = syn(s, t, r) - obs(s, t, r);
            residual(s, t, r) = two_scale * d;
            acc += static_cast<double>(d) * static_cast<double>(d);
          }
          mis(s, t) = acc;
        });
    auto const mh = Kokkos::create_mirror_view_and_copy(
        Kokkos::HostSpace(), Kokkos::subview(m_misfit, Kokkos::make_pair(0, S), Kokkos::ALL));
    m_shot_loss.assign(S, 0.0);
    for (int s = 0; s < S; ++s) {
      double acc = 0;
      for (int t = 0; t < nt; ++t) acc += mh(s, t);
      m_shot_loss[s] = scale * acc;
    }
    backward(w, residual);
  }

  /// Loss scale * sum (synthetic - observed)^2 of the batch (the shots' misfits added in batch
  /// order); its gradient is added to `out` (accumulate). `synthetic` receives the records.
  double loss_and_gradient(wavelet_view const& w, record_view const& observed, double scale, images_type const& out,
                           record_view const& synthetic) {
    compute(w, observed, scale, synthetic);
    accumulate(out);
    double loss = 0;
    for (double x : m_shot_loss) loss += x;
    return loss;
  }

  /// Steps per chunk of the `shots` schedule: the saved ring of a chunk's steps waits in a
  /// staging buffer of at most 16 MiB (and 32 steps) between the shots' time loops and the codec,
  /// or set_chunk_steps' value. The results do not depend on it (tested with 1, 3, 5 and 32).
  int chunk_steps() const {
    if (m_chunk_steps > 0) return m_chunk_steps;
    return core::chunk_steps(m_prop.max_shots(), m_stride, sizeof(Real));
  }

  /// Sets the steps per chunk of the `shots` schedule (0: automatic, see chunk_steps).
  void set_chunk_steps(int steps) {
    KSWEEP_REQUIRE(steps >= 0, "ksweep::core::GradientEngine::set_chunk_steps: " << steps << " steps must be >= 0");
    m_chunk_steps = steps;
  }

  /// Memory of the last run (boundary bytes of the last forward) for `observed` and
  /// `synthetic` record sizes in bytes.
  MemoryReport memory_report(std::size_t observed_bytes, std::size_t synthetic_bytes) const {
    MemoryReport r;
    r.strategy = storage::to_string(m_cfg.strategy);
    r.location = storage::to_string(m_cfg.location);
    r.dtype = storage::to_string(m_cfg.dtype);
    std::size_t const values = static_cast<std::size_t>(m_prop.n_shots()) * m_stride;
    std::size_t const step = storage::encoded_bytes(m_cfg.dtype, values, sizeof(Real));
    r.boundary_bytes = step * static_cast<std::size_t>(m_nt);
    r.layer_term_bytes = m_terms.span() * sizeof(Real) + (m_layer_d.span() + m_layer_roll.span()) * sizeof(Real) +
                         m_layer_acc.span() * sizeof(double);
    r.staging_bytes =
        (m_cfg.location == storage::Location::device
             ? 0
             : 2 * step * static_cast<std::size_t>(std::min(m_cfg.transfer_interval, std::max(m_nt, 1)))) +
        (m_stage.span() + m_start.span()) * sizeof(Real);
    auto const& l = m_prop.layout();
    std::size_t const level =
        static_cast<std::size_t>(m_prop.max_shots()) * l.field_rows() * (l.NX + 2 * R) * sizeof(Real);
    r.seed_bytes = 2 * level;
    r.wavefield_bytes = 2 * m_prop.state_bytes() - r.seed_bytes;
    r.image_bytes =
        (static_cast<std::size_t>(n_params + 2) * (m_prop.max_shots() + 1)) * l.model_rows() * l.nx * sizeof(double);
    r.observed_bytes = observed_bytes;
    r.synthetic_bytes = synthetic_bytes;
    r.peak_device_bytes = m_peak;
    return r;
  }

 private:
  using stage_view = Kokkos::View<Real**, Kokkos::LayoutRight, memory_space>;  // [step of chunk][shot x ring cell]

  stage_view const& stage(int steps) {
    std::size_t const width = static_cast<std::size_t>(m_prop.n_shots()) * m_stride;
    if (static_cast<int>(m_stage.extent(0)) < steps || m_stage.extent(1) != width)  // zeros: the padding stays zero
      m_stage = stage_view(Kokkos::view_alloc(m_prop.space(), std::string("ksweep::core::ring_stage")), steps, width);
    return m_stage;
  }
  auto stage_row(int i) const { return Kokkos::subview(m_stage, i, Kokkos::ALL); }

  // The `shots` schedule, forward and backward (gradient_shots.hpp): each chunk of steps runs
  // shot by shot, its saved rings staged between the shots' time loops and the codec.
  struct ForwardSave;
  void forward_shots(wavelet_view const& w, record_view const& synthetic, int nt);
  struct BackwardShots;
  void backward_shots(wavelet_view const& w, record_view const& residual, wavelet_view const& wavelet_grad);

  // What reverse step n does, the same for every schedule (the one case analysis of the sweep):
  // full saving decodes u^n (saved step n - 1; u^0 = 0) into the level before the newest and
  // images with it; boundary saving rebuilds u^{n-1} over the newest level (u^{n+1}) from the
  // ring of saved step n - 2 (zeros for u^0) and the reversed stencil, imaging with u^n as it
  // goes. Step 0 of boundary saving images with u^0 as it is and rebuilds nothing. From a start
  // state, u^0's cells come from the kept start (`start`) where rest has zeros, and full saving
  // images step 0 too.
  struct ReverseStep {
    int decode = -1;       // the saved step decoded (-1: none)
    bool image = false;    // the images take this step's term
    bool rebuild = false;  // u^{n-1} is rebuilt over the newest level
    bool start = false;    // the saved cells of u^0 come from the start state (decode is -1)
  };
  struct ReversePlan {
    bool full = false;
    bool from_state = false;
    KOKKOS_INLINE_FUNCTION ReverseStep at(int n) const {
      bool const start = from_state && n == (full ? 0 : 1);
      if (full) return {n >= 1 ? n - 1 : -1, n >= 1 || start, false, start};
      return {n >= 2 ? n - 2 : -1, true, n >= 1, start};
    }
    // The levels the steps [n0, n1) rebuild (each moves the forward wavefield one level back).
    int rebuilt(int n0, int n1) const {
      int k = 0;
      for (int n = n0; n < n1; ++n) k += at(n).rebuild ? 1 : 0;
      return k;
    }
  };
  ReversePlan reverse_plan() const { return {full(), m_from_state}; }

  // The batched schedule, forward and backward (gradient_batched.hpp): one launch per kind of
  // work per step over all shots.
  void forward_batched(wavelet_view const& w, record_view const& synthetic, int nt);
  void backward_batched(wavelet_view const& w, record_view const& residual, wavelet_view const& wavelet_grad);

  // The saving of step n's layer terms from the memories of `after` (the state after step n).
  SaveLayerTerms save_terms(typename propagator_type::State const& after, int n) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    SaveLayerTerms f;
    f.m_terms = m_terms;
    for (int a = 0; a < Dim; ++a) f.m_zeta[a] = after.zeta[a][after.aux];
    f.m_axis = m_term_axis;
    f.m_strip = m_term_strip;
    for (int a = 0; a < Dim; ++a) f.m_w[a] = static_cast<Real>(m_prop.layout().weight[a]);
    f.m_cells = m_n_terms;
    f.m_n = n;
    return f;
  }
  // The layer terms of step n applied to the images of mu^{n+1} = `lambda` (and to the rebuilt
  // level `u1`).
  ApplyLayerTerms apply_terms(field3 const& lambda, field3 const& u1, int n, bool rebuild) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    return {m_terms, lambda, u1, m_prop.c(), m_grad_c, m_term_model, m_term_field, m_n_terms, n, rebuild, 0};
  }

  // A run from a start state: the saved cells of u^0 (the newest forward level; ring_values'
  // layout), exact, into m_start before the first step.
  void save_start() {
    auto& p = m_prop;
    std::size_t const n = static_cast<std::size_t>(p.max_shots()) * m_stride;
    if (m_start.extent(0) != n)
      m_start = Kokkos::View<Real*, memory_space>(
          Kokkos::view_alloc(p.space(), Kokkos::WithoutInitializing, std::string("ksweep::core::start_cells")), n);
    using Sink = storage::ViewValues<Real, memory_space>;
    core::launch_points(p.space(), "ksweep::core::save_start",
                        storage::CopyValues<storage::RingValues<Real, memory_space>, Sink>{
                            ring_values(p.forward_newest()), Sink{m_start}},
                        p.n_shots() * m_stride);
  }
  // The kept u^0 of the batch's S shots, and as a value source into `sink`.
  auto start_values(int S) const {
    return Kokkos::subview(m_start, Kokkos::make_pair(std::size_t(0), static_cast<std::size_t>(S) * m_stride));
  }
  template <class Sink>
  storage::CopyValues<storage::ViewValues<Real, memory_space>, Sink> copy_start(Sink const& sink) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    return {storage::ViewValues<Real, memory_space>{m_start}, sink};
  }

  // Whether the batched schedule's runs of steps may go through the propagator's step graphs
  // (Propagator::run_steps): with the saved steps in device memory, whose store does nothing on
  // the host per step (host and disk stores move chunks on a thread of their own).
  bool graphs_fit() const { return m_cfg.location == storage::Location::device; }

  // The layer's chain rule for a forward run of nt steps: whether it runs (m_chain_run), the
  // layer cells (once), the saved differences, and the sources' taps in layer cells (per batch,
  // from the propagator's own taps: the ones the forward step injects).
  void prepare_layer_chain(int nt) {
    auto& p = m_prop;
    m_chain_run = false;
    if (!m_layer_chain || !p.layer_copies_model()) return;
    auto const space = p.space();
    using Kokkos::view_alloc;
    using Kokkos::WithoutInitializing;
    if (m_layer_field.extent(0) == 0 && !m_layer_listed) {
      auto const lc = core::layer_cells<Dim>(p.layout(), R);
      m_layer_listed = true;
      m_n_layer = static_cast<int>(lc.field.size());
      m_layer_field_host = lc.field;
      m_layer_field = upload(space, lc.field, "ksweep::core::layer_field");
      m_layer_model = upload(space, lc.model, "ksweep::core::layer_model");
    }
    if (m_n_layer == 0) return;
    m_chain_run = true;
    int const S = p.max_shots();
    KSWEEP_REQUIRE(
        static_cast<long long>(S) * m_n_layer < (1LL << 31),
        "ksweep::core::GradientEngine: " << m_n_layer << " layer cells x " << S
                                         << " shots exceeds 2^31 values per step; use fewer shots per batch");
    if (static_cast<int>(m_layer_d.extent(0)) != nt || static_cast<int>(m_layer_d.extent(1)) != S) {
      // On host backends the process's spare buffer (SpareBuffer: no fresh pages to fault in per
      // engine), handed back when the engine goes.
      std::size_t const n = static_cast<std::size_t>(nt) * S * m_n_layer;
      m_layer_d = layer_view();
      if (m_layer_store.extent(0) < n) {
        LayerSpare::give(std::move(m_layer_store));
        m_layer_store = LayerSpare::take(n, "ksweep::core::layer_d");
      }
      m_layer_d = layer_view(m_layer_store.data(), nt, S, m_n_layer);
    }
    if (m_layer_roll.extent(0) == 0) {
      m_layer_roll = layer_view(view_alloc(space, std::string("ksweep::core::layer_roll")), 3, S, m_n_layer);
      m_layer_acc = layer_acc(view_alloc(space, std::string("ksweep::core::layer_acc")), S, m_n_layer);
    }
    Kokkos::deep_copy(space, m_layer_roll, Real(0));  // u^0 = u^{-1} = 0
    if (m_from_state)                                 // the start's u^0 and u^{-1}, before step 0 injects its sources
      core::launch_points(space, "ksweep::core::layer_start",
                          core::LayerStart<Real, memory_space>{m_layer_roll, p.forward_newest(), p.forward_previous(),
                                                               m_layer_field, m_n_layer},
                          p.n_shots() * m_n_layer);
    // The sources' taps that fall in layer cells (an interpolated point next to the model's edge).
    auto const& src = p.sources();
    int const ns = p.n_shots(), taps = src.taps();
    Kokkos::View<int**, Kokkos::LayoutRight, Kokkos::HostSpace> zh("ksweep::core::src_z", src.z.extent(0),
                                                                   src.z.extent(1)),
        xh("ksweep::core::src_x", src.x.extent(0), src.x.extent(1));
    Kokkos::View<Real**, Kokkos::LayoutRight, Kokkos::HostSpace> wh("ksweep::core::src_w", src.w.extent(0),
                                                                    src.w.extent(1));
    Kokkos::deep_copy(zh, src.z);
    Kokkos::deep_copy(xh, src.x);
    Kokkos::deep_copy(wh, src.w);
    int const row = p.layout().NX + 2 * R;
    std::vector<int> off(ns + 1, 0), cell, point;
    std::vector<Real> weight;
    for (int s = 0; s < ns; ++s) {
      for (int k = 0; k < taps; ++k) {
        int const f = zh(s, k) * row + xh(s, k);
        auto const it = std::lower_bound(m_layer_field_host.begin(), m_layer_field_host.end(), f);
        Real const wk = wh.extent(0) > 0 ? wh(s, k) : Real(1);
        if (it == m_layer_field_host.end() || *it != f || wk == Real(0)) continue;
        cell.push_back(static_cast<int>(it - m_layer_field_host.begin()));
        point.push_back(src.per_point == 1 ? k : k / src.per_point);
        weight.push_back(wk);
      }
      off[s + 1] = static_cast<int>(cell.size());
    }
    for (int s = ns; s < S; ++s) off.push_back(off.back());
    m_has_layer_sources = !cell.empty();
    // Into the last batch's allocations where the sizes allow: a run's launches then name the
    // same buffers as the last run's, and its step graph (step_graph.hpp) is replayed.
    refill(space, m_layer_src_off, off, "ksweep::core::layer_src_off");
    refill(space, m_layer_src_cell, cell, "ksweep::core::layer_src_cell");
    refill(space, m_layer_src_point, point, "ksweep::core::layer_src_point");
    refill(space, m_layer_src_w, weight, "ksweep::core::layer_src_w");
    space.fence();
  }
  LayerSave layer_save(wavelet_view const& w, field3 const& u, int n) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    return {m_layer_roll,
            m_layer_d,
            u,
            m_layer_field,
            m_layer_src_off,
            m_layer_src_cell,
            m_layer_src_point,
            m_layer_src_w,
            w,
            m_n_layer,
            n};
  }
  LayerChain layer_chain(field3 const& lambda, int n) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    return {m_layer_d, lambda, m_layer_acc, m_layer_field, m_n_layer, n};
  }

  // A device copy of host values, allocated and filled on `space` (not fenced).
  template <class T>
  static Kokkos::View<T*, memory_space> upload(ExecSpace const& space, std::vector<T> const& values,
                                               char const* label) {
    Kokkos::View<T*, memory_space> d(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)),
                                     values.size());
    Kokkos::deep_copy(space, d,
                      Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          values.data(), values.size()));
    return d;
  }

  // upload() into `d` itself when it holds as many values (the caller fences before `values` goes).
  template <class T>
  static void refill(ExecSpace const& space, Kokkos::View<T*, memory_space>& d, std::vector<T> const& values,
                     char const* label) {
    if (d.extent(0) != values.size()) {
      d = upload(space, values, label);
      return;
    }
    Kokkos::deep_copy(space, d,
                      Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          values.data(), values.size()));
  }

  // The saved cells of each shot's wavefield `u`, as a codec value source or sink.
  storage::RingValues<Real, memory_space> ring_values(field3 const& u) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    return {u, m_offsets, m_ring_div, m_pad};
  }

  // One launch: the adjoint point work, then `first` over n_first indices, then `second`
  // over n_second indices. All three write disjoint cells (adjoint wavefield; source cells of
  // the forward wavefield; ring cells of the forward wavefield).
  template <class First, class Second>
  void launch_fused(typename propagator_type::PointWork const& adj, First const& first, int n_first,
                    Second const& second, int n_second) const {
    using inner = core::Concat<First, Second>;
    using fused = core::Concat<typename propagator_type::points_functor, inner>;
    auto const f = [&] {
      ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
      return fused{adj.f, inner{first, second, n_first}, adj.count};
    }();
    core::launch_points(m_prop.space(), "ksweep::core::backward_points", f, adj.count + n_first + n_second);
  }
  // The physics' imaging functor over the given levels, with its own coefficients bound.
  imaging_type make_imaging(field3 const& u0, field3 const& lambda, field3 const& u1, bool reconstruct) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    imaging_type f(u0, lambda, u1, m_prop.c(), m_grad_c, m_isrc, m_irec, m_prop.layout(), reconstruct);
    f.m_xcorr = m_xcorr;
    f.m_illum = illuminations();
    m_prop.coefficients().bind_imaging(f, m_grad_more.data());
    return f;
  }

  // The adjoint field is mu = c lambda: the images hold sum mu T u (T the model cells' step
  // operator, L for constant density) and sum mu^2. Per shot, on the model cells:
  //   d/dv   = sum lambda T u dc/dv = (2 / v) sum mu T u            (c = v^2 ...: dc/dv = 2 c / v)
  //   the other parameters' images by the physics' chain rule (coefficients_type::Chain; variable
  //   density: d/drho = (1 / rho) sum mu T u - (1 / (2 rho^2)) grho),
  //   sum lambda^2 = (sum mu^2) / c^2 (c is fixed in time).
  // A functor rather than a lambda: nvcc's extended lambdas can neither live in a private
  // member function nor first-capture a variable inside `if constexpr`. Public: a CUDA
  // kernel's host stub names its functor's type.
 public:
  using chain_type = decltype(std::declval<coefficients_type const&>().chain(std::declval<shot_images const*>()));
  struct ScaleImages {
    shot_images gc, irc;
    chain_type chain;
    model_field c, vp;
    Rows<Dim> rows;
    int wd;
    bool xcorr;  // irc holds sum u mu (divided by c once), not sum mu^2
    KOKKOS_INLINE_FUNCTION void operator()(int s, int iz, int ix) const {
      double const cc = static_cast<double>(c(rows.model_field(iz), ix + wd + R));
      double const raw = gc(s, iz, ix);
      gc(s, iz, ix) = raw * (2.0 / static_cast<double>(vp(iz, ix)));
      chain(s, iz, ix, raw);
      irc(s, iz, ix) /= xcorr ? cc : cc * cc;
    }
  };

 private:
  // The end of backward(): the images of the S shots from d/dc to the parameters (scale_images),
  // then the layer's chain rule folded into the velocity's.
  void finish_images(int S) {
    scale_images(S);
    if (m_chain_run)
      core::launch_points(
          m_prop.space(), "ksweep::core::layer_fold",
          LayerFold{m_layer_acc, m_grad_c, m_prop.c(), m_prop.vp_model(), m_layer_field, m_layer_model, m_n_layer}, S);
  }
  void scale_images(int S) {
    auto const& l = m_prop.layout();
    launch_for("ksweep::core::scale_images",
               Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(
                   m_prop.space(), {0, 0, 0}, {S, l.model_rows(), l.nx}),
               ScaleImages{m_grad_c, m_irec, m_prop.coefficients().chain(m_grad_more.data()), m_prop.c(),
                           m_prop.vp_model(), Rows<Dim>(l), l.left, m_xcorr});
  }

  // Imaging (and rebuild) of backward step n, with the layer terms of the cells next to the layer.
  void imaging(field3 const& u0, field3 const& u1, field3 const& lambda, bool reconstruct, int S, int n) {
    auto const& l = m_prop.layout();
    imaging_type const f = make_imaging(u0, lambda, u1, reconstruct);
    core::launch_grid<void>(m_prop.space(), reconstruct ? "ksweep::core::image_and_rebuild" : "ksweep::core::image", f,
                            S * l.model_rows(), l.nx, m_prop.runs_cells());
    if (m_n_terms > 0)
      core::launch_points(m_prop.space(), "ksweep::core::apply_layer_terms", apply_terms(lambda, u1, n, reconstruct),
                          S);
  }

  propagator_type& m_prop;
  storage::StorageConfig m_cfg;
  int m_n_ring = 0;                 // saved cells per shot
  int m_stride = 0;                 // saved values per shot (cells and padding: ring_layout)
  storage::FastDivisor m_ring_div;  // index -> (shot, ring value) in the codec's ring sources and sinks
  Kokkos::View<Real**, Kokkos::LayoutRight, memory_space> m_pad;  // the padding values (zeros)
  int m_nt = 0;
  std::size_t m_peak = 0;
  Kokkos::View<int*, memory_space> m_offsets;
  shot_images m_grad_c, m_isrc, m_irec;               // per shot: d/dc (d/dv after backward) and illuminations
  std::array<shot_images, n_params - 1> m_grad_more;  // per shot: d/dp of the other parameters (variable
                                                      // density: rho), after backward
  Kokkos::View<double**, Kokkos::LayoutRight, memory_space> m_misfit;  // [shot][time] sums over receivers
  std::vector<double> m_shot_loss;
  int m_shots = 0;
  int m_chunk_steps = 0;             // 0: automatic
  std::function<void(int)> m_watch;  // set_reverse_watch
  std::vector<int> m_watch_steps;    // its steps, ascending (empty: every step)
  bool watches(int n) const {
    return m_watch && (m_watch_steps.empty() || std::binary_search(m_watch_steps.begin(), m_watch_steps.end(), n));
  }
  std::unique_ptr<storage::StepStore<Real, ExecSpace>> m_store;  // kept between runs of one size (forward())
  bool m_saved = false;                                          // forward() saved a run that backward() reads
  stage_view m_stage;  // the `shots` schedule's saved rings of a chunk of steps
  // The layer-term cells (LayerTermCells) and their terms of every forward step.
  int m_n_terms = 0;
  Kokkos::View<int*, memory_space> m_term_axis, m_term_strip, m_term_model, m_term_field;
  terms_view m_terms;
  // The layer's chain rule (set_layer_chain): the layer cells (row-major), their saved
  // differences D [step][shot][cell], the last three levels, the per-shot sums, and the
  // sources' taps in layer cells [shot offsets | cell, point, weight].
  bool m_layer_chain = false, m_chain_run = false, m_layer_listed = false, m_has_layer_sources = false;
  bool m_xcorr = false;                       // set_cross_correlation
  bool m_illum = true;                        // set_illuminations
  bool m_from_state = false;                  // the last forward() ran from a start state
  Kokkos::View<Real*, memory_space> m_start;  // its u^0's saved cells [shot x stride] (save_start)
  int m_n_layer = 0;
  std::vector<int> m_layer_field_host;
  Kokkos::View<int*, memory_space> m_layer_field, m_layer_model;
  using LayerSpare = SpareBuffer<Real, memory_space>;
  Kokkos::View<Real*, memory_space> m_layer_store;  // holds m_layer_d's values (LayerSpare)
  layer_view m_layer_d, m_layer_roll;               // m_layer_d: a view into m_layer_store
  layer_acc m_layer_acc;
  Kokkos::View<int*, memory_space> m_layer_src_off, m_layer_src_cell, m_layer_src_point;
  Kokkos::View<Real*, memory_space> m_layer_src_w;
};

}  // namespace ksweep::core

#include <ksweep/core/gradient_batched.hpp>
#include <ksweep/core/gradient_shots.hpp>
