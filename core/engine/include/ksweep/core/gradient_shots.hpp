#pragma once
/// \file gradient_shots.hpp
/// GradientEngine (gradient.hpp): the `shots` schedule of the host backends, defined out of its
/// class. Each chunk of steps runs shot by shot (one shot's whole rows while they are in cache),
/// its saved rings staged between the shots' time loops and the codec; the per-step work is the
/// batched schedule's (ReversePlan), so the results are the same bits.

#include <ksweep/core/gradient.hpp>

#include <algorithm>
#include <iterator>

namespace ksweep::core {

// The `shots` schedule, forward: each chunk of steps runs shot by shot (the ring of u^{n+1}
// copied into the staging row of step n), then the chunk's rows go through the codec.
template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
struct GradientEngine<Real, Order, ExecSpace, Dimension, Physics>::ForwardSave {
  typename propagator_type::template ShotStep<core::ForwardTag> m_step;
  Kokkos::View<int const*, memory_space> m_offsets;
  stage_view m_stage;
  SaveLayerTerms m_terms[2];  // by the step's parity (m_step.parity), as its kernels
  int m_stride, m_n0;
  LayerSave m_layer;  // the layer's chain rule (m_cells 0: off)
  void operator()(int s, int n) const {
    m_step(s, n);
    auto const& u = m_step.at(n).m_out;  // u^{n+1}
    Real const* src = u.data() + static_cast<std::size_t>(s) * u.stride(0);
    if (m_layer.m_cells > 0) m_layer.shot(src, n, s);
    Real* dst = &m_stage(n - m_n0, static_cast<std::size_t>(s) * m_stride);
    for (int k = 0; k < m_stride; ++k) {
      int const o = m_offsets(k);
      dst[k] = o >= 0 ? src[o] : Real(0);
    }
    SaveLayerTerms const& t = m_terms[m_step.parity(n)];
    for (int j = 0; j < t.m_cells; ++j) t.apply(n, s, j);
  }
};

template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void GradientEngine<Real, Order, ExecSpace, Dimension, Physics>::forward_shots(wavelet_view const& w,
                                                                               record_view const& synthetic, int nt) {
  if constexpr (core::impl::runs_by_rows<ExecSpace>) {
    auto& p = m_prop;
    int const T = chunk_steps();
    stage(T);
    for (int n0 = 0; n0 < nt; n0 += T) {
      int const n1 = std::min(nt, n0 + T);
      ForwardSave body{p.forward_shot_step(w, synthetic, n0), m_offsets, m_stage, {}, m_stride, n0, {}};
      if (m_chain_run) body.m_layer = layer_save(w, p.forward_newest(), n0);
      for (int par = 0; par < 2; ++par)  // the memories the step n0 + par writes
        body.m_terms[par] = save_terms(p.forward_state_after(par), n0 + par);
      p.run_shot_steps(propagator_type::Direction::forward, "ksweep::core::forward_shots", body, n0, n1, false);
      for (int n = n0; n < n1; ++n)
        m_store->put_from(n, storage::ViewValues<Real const, memory_space>{stage_row(n - n0)});
    }
  } else {
    (void)w, (void)synthetic, (void)nt;
  }
}

// The `shots` schedule, backward: the same per-step work as the batched loop in backward(),
// shot by shot, with the saved steps a chunk needs decoded into the staging rows first.
template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
struct GradientEngine<Real, Order, ExecSpace, Dimension, Physics>::BackwardShots {
  typename propagator_type::template ShotStep<core::AdjointTag> m_adj;
  core::InjectPoints<Real, memory_space> m_src;  // w[n] taken out of u^{n+1}
  imaging_type m_img[2];                         // by parity of the steps from m_n_base
  ApplyLayerTerms m_terms[2];                    // the layer terms on the levels of m_img
  LayerChain m_chain[2];                         // the layer's chain rule (m_cells 0: off), same parity
  field3 m_u0[2];                                // the u^n buffer of each parity (full: decoded into)
  Kokkos::View<int const*, memory_space> m_offsets;
  stage_view m_stage;
  int m_stride, m_n_base, m_n_src;
  ReversePlan m_plan;
  void restore(field3 const& u, int s, int row) const {  // ring cells of shot s from a staging row, or zeros
    Real* dst = u.data() + static_cast<std::size_t>(s) * u.stride(0);
    Real const* src = row < 0 ? nullptr : &m_stage(row, static_cast<std::size_t>(s) * m_stride);
    for (int k = 0; k < m_stride; ++k) {
      int const o = m_offsets(k);
      if (o >= 0) dst[o] = src ? src[k] : Real(0);
    }
  }
  void operator()(int s, int n) const {
    m_adj.points(s, n);
    int const k = m_n_base - n, par = m_adj.parity(n);  // the staging row; the levels' parity
    imaging_type const& img = m_img[par];
    auto const step = m_plan.at(n);
    bool const image = step.image, rebuild = step.rebuild, staged = step.decode >= 0 || step.start;
    if (rebuild) {
      for (int i = 0; i < m_n_src; ++i) m_src.apply(img.m_u1, s, i, n);
      restore(img.m_u1, s, staged ? k : -1);  // the ring of u^{n-1}
    } else if (staged) {
      restore(m_u0[par], s, k);  // u^n
    }
    // One sweep over the rows: the adjoint stencil of row iz and the imaging (and rebuild) of
    // the same row, while mu^{n+1} and c of that row are in cache. The two are independent
    // (imaging reads mu^{n+1} and u^n, writes u^{n+1} -> u^{n-1}; the stencil reads mu^{n+1},
    // writes mu^n over mu^{n+2}), so the result is the batched schedule's, bit for bit.
    auto const& stencil = m_adj.at(n);
    for (int pr = 0; pr < m_adj.m_rows; ++pr) {
      int const r = s * m_adj.m_rows + pr;
      stencil(core::impl::RowTag<core::AdjointTag>{}, r);
      if (!image) continue;
      int sh, iz, iy;
      stencil.decode(r, sh, iz, iy);
      int const mr = img.model_row(iz, iy);
      if (mr >= 0) img.row(s, mr, rebuild);
    }
    if (image) m_terms[par].apply(s, n, rebuild);
    LayerChain const& chain = m_chain[par];
    if (chain.m_cells > 0) chain.shot(s, n);
  }
};

// The `shots` schedule of backward(), chunk by chunk from the last step down to n = 0; a step
// that a reverse watch watches ends a chunk, and the watch is called after it.
template <class Real, int Order, class ExecSpace, int Dimension, class Physics>
void GradientEngine<Real, Order, ExecSpace, Dimension, Physics>::backward_shots(wavelet_view const& w,
                                                                                record_view const& residual,
                                                                                wavelet_view const& wavelet_grad) {
  if constexpr (core::impl::runs_by_rows<ExecSpace>) {
    auto& p = m_prop;
    int const T = chunk_steps(), S = p.n_shots();
    auto const plan = reverse_plan();
    stage(T);
    for (int n1 = m_nt, n0; n1 > 0; n1 = n0) {
      n0 = std::max(0, n1 - T);
      if (m_watch && m_watch_steps.empty()) {  // every step watched: chunks of one step
        n0 = n1 - 1;
      } else if (m_watch) {  // the watched step nearest below n1, if it is in reach, ends the chunk
        auto const below = std::lower_bound(m_watch_steps.begin(), m_watch_steps.end(), n1);
        if (below != m_watch_steps.begin()) n0 = std::max(n0, *std::prev(below));
      }
      int const top = n1 - 1;
      for (int n = top; n >= n0; --n)  // the saved steps this chunk reads, in decreasing order
        if (int const saved = plan.at(n).decode; saved >= 0)
          m_store->with_decoder(m_store->fetch(saved), storage::ViewValues<Real, memory_space>{stage_row(top - n)},
                                [&](auto const& dec) {
                                  launch_for("ksweep::core::decode_chunk",
                                             Kokkos::RangePolicy<ExecSpace>(p.space(), 0, S * m_stride), dec);
                                });
        else if (plan.at(n).start)  // u^0's saved cells as the run started
          Kokkos::deep_copy(p.space(), stage_row(top - n), start_values(S));
      BackwardShots body;
      body.m_adj = p.adjoint_shot_step(residual, wavelet_grad, top);
      body.m_src = p.source_removal({}, w, 0);
      for (int par = 0; par < 2; ++par) {
        // The forward levels of the steps of parity `par` from the chunk's top (the reverse
        // cursor: a rebuilding step makes the level before the newest one).
        auto const levels = p.reverse_levels(par, !full());
        body.m_img[par] = make_imaging(levels.older, body.m_adj.m_k[par].m_cur, levels.newer, !full());
        body.m_terms[par] = apply_terms(body.m_adj.m_k[par].m_cur, levels.newer, 0, !full());
        if (m_chain_run) body.m_chain[par] = layer_chain(body.m_adj.m_k[par].m_cur, 0);
        body.m_u0[par] = levels.older;
      }
      body.m_offsets = m_offsets;
      body.m_stage = m_stage;
      body.m_stride = m_stride;
      body.m_n_base = top;
      body.m_n_src = body.m_src.count();
      body.m_plan = plan;
      p.run_shot_steps(propagator_type::Direction::adjoint, "ksweep::core::backward_shots", body, n0, n1, true);
      p.step_back_forward(plan.rebuilt(n0, n1));  // one level per rebuilding step
      if (watches(n0)) m_watch(n0);               // lambda^{n0} the newest level
    }
  } else {
    (void)w, (void)residual, (void)wavelet_grad;
  }
}

}  // namespace ksweep::core
