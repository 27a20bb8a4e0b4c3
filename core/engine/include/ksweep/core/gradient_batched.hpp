#pragma once
/// \file gradient_batched.hpp
/// GradientEngine (gradient.hpp): the batched schedule (every backend; on hosts the rows of all
/// shots per launch), defined out of its class. Each step is one launch per kind of work over
/// all shots: forward, the step, the ring gathered straight into the encoder, the layer terms of
/// the model cells next to the layer (constant density) and the layer's chain rule; backward,
/// the steps of the reverse plan (ReversePlan), which the `shots` schedule (gradient_shots.hpp)
/// walks too.

#include <ksweep/core/gradient.hpp>

namespace ksweep::core {

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void GradientEngine<Real, Order, ExecSpace, Dimension, Physics>::forward_batched(wavelet_view const& w,
                                                                                 record_view const& synthetic, int nt) {
  auto& p = m_prop;
  int const S = p.n_shots();
  for (int n = 0; n < nt; ++n) {
    p.forward_step(n, w, synthetic);
    m_store->put_from(n, ring_values(p.forward_newest()));  // u^{n+1}
    if (m_n_terms > 0)
      core::launch_points(p.space(), "ksweep::core::save_layer_terms", save_terms(p.forward_state(), n), S * m_n_terms);
    if (m_chain_run) {
      LayerSave const ls = layer_save(w, p.forward_newest(), n);
      core::launch_points(p.space(), "ksweep::core::save_layer", ls, S * m_n_layer);
      if (m_has_layer_sources) core::launch_points(p.space(), "ksweep::core::layer_sources", LayerSources{ls}, S);
    }
  }
}

// Three or four launches per reverse step (see backward()), a reverse watch called after those
// it watches.
template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void GradientEngine<Real, Order, ExecSpace, Dimension, Physics>::backward_batched(wavelet_view const& w,
                                                                                  record_view const& residual,
                                                                                  wavelet_view const& wavelet_grad) {
  auto& p = m_prop;
  auto const space = p.space();
  int const S = p.n_shots();
  int const n_src = S * p.sources().taps(), n_ring = S * m_stride;
  auto const plan = reverse_plan();
  for (int n = m_nt - 1; n >= 0; --n) {
    // Fields on entry: lambda^{n+1} is the newest adjoint level; u^{n+1} the newest forward
    // level, u^n the one before (full saving decodes it there).
    auto const step = plan.at(n);
    auto const adj = p.adjoint_points(n, residual, wavelet_grad);  // wavelet_grad[n] = lambda^{n+1}
    auto const levels = p.reverse_levels(0, step.rebuild);
    if (step.rebuild) {
      // The sources w[n] are taken out of u^{n+1} first (the forward step added them through
      // "- u^{n-1}"), the ring of u^{n-1} comes from the store, the model cells from the
      // reversed step; then u^n is the newest forward level.
      auto const sources = p.source_removal(levels.newer, w, n);
      auto const sink = ring_values(levels.newer);
      if (step.decode >= 0)
        m_store->with_decoder(m_store->fetch(step.decode), sink,
                              [&](auto const& dec) { launch_fused(adj, sources, n_src, dec, n_ring); });
      else if (step.start) launch_fused(adj, sources, n_src, copy_start(sink), n_ring);  // u^0 as the run started
      else
        launch_fused(adj, sources, n_src, storage::ZeroValues<storage::RingValues<Real, memory_space>>{sink},
                     n_ring);  // u^0 = 0
      imaging(levels.older, levels.newer, p.adjoint_newest(), true, S, n);
      p.exchange(levels.newer);  // a split model: the halo of the rebuilt u^{n-1} at the cuts
      p.step_back_forward();
    } else if (step.decode >= 0 || step.start) {
      auto const sink = ring_values(levels.older);
      if (step.start) launch_fused(adj, core::NoWork{}, 0, copy_start(sink), n_ring);  // u^0 as the run started
      else
        m_store->with_decoder(m_store->fetch(step.decode), sink,
                              [&](auto const& dec) { launch_fused(adj, core::NoWork{}, 0, dec, n_ring); });
      p.exchange(levels.older);  // a split model: the halo of u^n at the cuts
      imaging(levels.older, levels.newer, p.adjoint_newest(), false, S, n);
    } else {
      core::launch_points(space, "ksweep::core::adjoint_points", adj.f, adj.count);
      if (step.image) imaging(levels.older, levels.newer, p.adjoint_newest(), false, S, n);
    }
    if (m_chain_run)
      core::launch_points(space, "ksweep::core::layer_chain", layer_chain(p.adjoint_newest(), n), S * m_n_layer);
    p.advance_adjoint();  // lambda^n
    if (watches(n)) m_watch(n);
  }
}

}  // namespace ksweep::core
