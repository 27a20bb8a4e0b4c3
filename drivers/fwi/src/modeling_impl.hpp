#pragma once
// Modeling of one precision, stencil order, dimension and physics (see modeling.hpp);
// instantiated by fwi_instantiate.hpp in fwi_2d.cpp, fwi_3d.cpp, fwi_vd_2d.cpp and fwi_vd_3d.cpp.

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/core/gradient.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/fwi/domains.hpp>
#include "modeling_run.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ksweep::fwi {

namespace impl {

/// The shots [first, first + count) of a set-up's survey.
struct ShotBatch {
  int first = 0, count = 0;
};

template <class Real, int Order, int Dim, class Physics>
class ModelingRun final : public Modeling<Real>::Impl {
 public:
  using Base = typename Modeling<Real>::Impl;
  using ExecSpace = Kokkos::DefaultExecutionSpace;
  using memory_space = ExecSpace::memory_space;
  using P = core::Propagator<Real, Order, ExecSpace, Dim, Physics>;
  using E = core::GradientEngine<Real, Order, ExecSpace, Dim, Physics>;
  using wavelet_view = typename P::wavelet_view;
  using record_view = typename P::record_view;
  using host3 = Kokkos::View<Real***, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using image = typename E::image;
  using device_images = Kokkos::View<double**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryUnmanaged>;
  using host_images = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  /// Host backends use the caller's arrays in place.
  static constexpr bool host_backend = Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;
  /// The caller's arrays are in the default memory space (Modeling::set_arrays).
  bool device_arrays() const { return this->arrays == Arrays::device; }
  /// The caller's arrays used in place: on host backends, or given on the device.
  bool in_place() const { return host_backend || device_arrays(); }

  explicit ModelingRun(ModelingSetup s) : Base(std::move(s)) {
    auto const& st = this->setup;
    core::check_time(st.dt, st.nt);
    core::check_grid(st.grid, st.pml, Order);
    core::check_survey(st.survey, st.grid, st.pml);
    KSWEEP_REQUIRE(st.batch >= 0, "batch = " << st.batch << " must be >= 0 (0: every shot at once)");
    m_shots = st.survey.n_shots;
    m_ns = st.survey.n_sources;
    m_nr = st.survey.n_receivers;
    m_nt = st.nt;
    m_batch = st.batch > 0 ? std::min(st.batch, m_shots) : m_shots;
    m_rows = static_cast<int>(st.grid.rows());
    m_nx = st.grid.nx;
    m_mine = {0, m_shots};
    m_whole_rows = m_rows;
    m_whole_nx = m_nx;
    bool const split = st.domains.split();
    if (split || (st.ranks && st.ranks->size() > 1)) {
      // Shot groups over the ranks (one rank each, or one per subdomain of a split model).
      KSWEEP_REQUIRE(!split || Physics::row.splits, "physics \"" << Physics::name << "\" (" << Physics::row.summary
                                                                 << ") does not run on a model split into domains yet "
                                                                    "(parallel.domains)");
      KSWEEP_REQUIRE(st.ranks, "ModelingSetup: domains " << core::describe(st.domains, st.grid.dim())
                                                         << " split the model over ranks, and no ranks were given");
      m_ranks = *st.ranks;
      m_domains = st.domains;
      // Cuts where the storage's codec blocks end, so that they code alike on every split.
      if (split)
        m_domains.align = core::cut_alignment(core::Layout(st.grid, st.pml, Order, P::R),
                                              st.storage.strategy == storage::Strategy::full, st.storage.dtype);
      m_dec = decompose(*m_ranks, m_domains, st.grid, P::R);
      auto const slice = comm::slice_of(m_shots, m_dec->group_index, m_dec->groups);
      m_mine = {slice.first, slice.count};
      m_batch = std::max(1, std::min(m_batch, slice.count));
    }
    if (split) {
      // The damping profiles' velocity (the whole model's maximum) is set with the velocity.
      m_sub = core::subdomain(st.grid, st.pml, m_domains, m_dec->domain_index, 1.0);
      m_rows = static_cast<int>(m_sub.grid.rows());
      m_nx = m_sub.grid.nx;
      m_prop = std::make_unique<P>(m_space, m_sub.grid, m_sub.pml, st.dt, m_batch);
      m_prop->set_schedule(st.schedule == core::Schedule::shots ? core::Schedule::automatic : st.schedule);
      m_halo = link_halo(*m_prop, *m_dec, m_sub);
      return;
    }
    m_prop = std::make_unique<P>(m_space, st.grid, st.pml, st.dt, m_batch);
    m_prop->set_schedule(st.schedule);
  }

  // One field per parameter of the physics (and of the layer, or none: the model's own), checked
  // here for their number and presence, by the propagator for their values.
  void set_model(std::vector<Real const*> const& fields, std::vector<Real const*> const& layer) override {
    auto const& params = physics_parameters(this->setup.physics);
    auto const list = [&] {
      std::string l;
      for (auto const& q : params) l += std::string(l.empty() ? "" : ", ") + q.name;
      return l;
    };
    KSWEEP_REQUIRE(fields.size() == params.size(), "set_model: " << fields.size() << " field(s) given; physics \""
                                                                 << to_string(this->setup.physics) << "\" has "
                                                                 << params.size() << " (" << list() << ")");
    KSWEEP_REQUIRE(layer.empty() || layer.size() == params.size(),
                   "set_model: " << layer.size() << " layer field(s) given; give one per parameter (" << list()
                                 << "), or none (the layer repeats the model's edges)");
    for (std::size_t p = 0; p < params.size(); ++p) {
      KSWEEP_REQUIRE(fields[p], "set_model: no " << params[p].noun << " given");
      KSWEEP_REQUIRE(layer.empty() || layer[p], "set_model: no " << params[p].noun << " of the layer given");
    }
    // A physics built on the host (variable density) takes host copies of device arrays.
    std::vector<std::vector<Real>> staged;
    auto const on_host = [&](std::vector<Real const*> const& from) {
      if (!device_arrays() || P::coefficients_type::on_device) return from;
      std::vector<Real const*> to;
      auto const n = static_cast<std::size_t>(this->setup.grid.cells());
      for (Real const* p : from) {
        staged.emplace_back(n);
        Kokkos::deep_copy(m_space,
                          Kokkos::View<Real*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(staged.back().data(), n),
                          Kokkos::View<Real const*, memory_space, Kokkos::MemoryUnmanaged>(p, n));
        to.push_back(staged.back().data());
      }
      m_space.fence();
      return to;
    };
    if constexpr (P::coefficients_type::on_device) {
      set_velocity(fields[0], layer.empty() ? nullptr : layer[0]);
    } else {
      auto const& fields_h = on_host(fields);
      auto const& layer_h = on_host(layer);
      KSWEEP_REQUIRE(!split(),
                     "set_model: physics \"" << to_string(this->setup.physics) << "\" on a model split into domains");
      std::array<Real const*, P::n_parameters> f{}, l{};
      std::copy(fields_h.begin(), fields_h.end(), f.begin());
      if (!layer_h.empty()) {
        std::copy(layer_h.begin(), layer_h.end(), l.begin());
        m_prop->set_model(l, true);
        m_prop->set_model(f, false);
      } else {
        m_prop->set_model(f, true);
      }
    }
    m_velocity_set = true;
  }

  // From rest when `state` holds no start (set_forward_state of nulls is forward_reset), and
  // handing back what its end asks for (nothing for nulls).
  void forward(Real const* wavelets, Real* records, ForwardState<Real> const& state) override {
    bool const stated = state.start_now || state.start_before || state.start_memory || state.end_now ||
                        state.end_before || state.end_memory;
    KSWEEP_REQUIRE(!stated || !split(),
                   "forward: a start or end state with a model split into domains (parallel.domains) is "
                   "not supported; run it on whole-model ranks");
    KSWEEP_REQUIRE(records || !parallel(), "forward: no records array given (the ranks gather them there)");
    auto const n = padded_shape();
    auto const cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
    auto const memory = static_cast<std::size_t>(m_prop->memory_values());
    auto const at = [](auto* p, std::size_t per_shot, ShotBatch const& b) {
      return p ? p + per_shot * static_cast<std::size_t>(b.first) : p;
    };
    auto const stopped = for_each_batch([&](ShotBatch const& b) {
      auto const w = wavelets_in(wavelets, b);
      auto const r = records_out(records, b, "ksweep::fwi::records");
      m_prop->set_forward_state(at(state.start_now, cells, b), at(state.start_before, cells, b),
                                at(state.start_memory, memory, b));
      m_prop->forward_continue(w, r);
      m_prop->get_forward_state(at(state.end_now, cells, b), at(state.end_before, cells, b),
                                at(state.end_memory, memory, b));
      copy_out(r, records, b, m_nt * m_nr);
    });
    gather_shots(records, static_cast<std::size_t>(m_nt) * m_nr);
    if (state.end_now) gather_shots(state.end_now, cells);
    if (state.end_before) gather_shots(state.end_before, cells);
    if (state.end_memory) gather_shots(state.end_memory, memory);
    if (stopped) std::rethrow_exception(stopped);
  }

  std::array<int, 3> padded_shape() const override {
    auto const& l = m_prop->layout();
    return {l.NZ, l.NY, l.NX};
  }

  long long memory_values(int axis) const override { return static_cast<long long>(m_prop->memory_values(axis)); }

  void adjoint(Real const* records, Real* wavelet_grad, EndGradient<Real> const& end) override {
    KSWEEP_REQUIRE(wavelet_grad || !parallel(), "adjoint: no wavelet gradient array given (the ranks gather it there)");
    auto const stopped = for_each_batch([&](ShotBatch const& b) {
      auto const r = records_in(records, b, "ksweep::fwi::adjoint_records");
      auto const g = wavelets_out(wavelet_grad, b);
      m_prop->adjoint(r, g, end_of(end, b));
      copy_out(g, wavelet_grad, b, m_ns * m_nt);
    });
    gather_shots(wavelet_grad, static_cast<std::size_t>(m_ns) * m_nt);
    if (stopped) std::rethrow_exception(stopped);
  }

  double gradient(Real const* wavelets, Real const* observed, double scale, ModelingImages const& out, Real* synthetic,
                  double* shot_losses) override {
    KSWEEP_REQUIRE(observed, "gradient: no observed data given");
    auto const img = images(out);
    auto const part = part_images(img);
    auto& e = engine();
    e.set_illuminations(out.illum_src || out.illum_rec);                 // summed only when asked for
    std::vector<double> losses(static_cast<std::size_t>(m_shots), 0.0);  // this rank's slots only
    auto const stopped = for_each_batch([&](ShotBatch const& b) {
      auto const w = wavelets_in(wavelets, b);
      auto const obs = records_in(observed, b, "ksweep::fwi::observed");
      auto const syn = records_out(synthetic, b, "ksweep::fwi::synthetic");
      e.compute(w, obs, scale, syn);
      keep_images(b, part);
      copy_out(syn, synthetic, b, m_nt * m_nr);
      auto const& l = e.shot_losses();
      for (int i = 0; i < b.count; ++i) losses[static_cast<std::size_t>(b.first + i)] = l[static_cast<std::size_t>(i)];
    });
    reduce_images(part, img);
    images_out(img, out);
    if (synthetic) gather_shots(synthetic, static_cast<std::size_t>(m_nt) * m_nr);
    if (parallel()) {
      // Each slot from one rank (a shot group's first subdomain): the sum over ranks is exact.
      if (m_dec->domain_index != 0) std::fill(losses.begin(), losses.end(), 0.0);
      m_ranks->allreduce_sum(losses.data(), losses.size());
    }
    if (stopped) std::rethrow_exception(stopped);
    double loss = 0;
    for (std::size_t s = 0; s < losses.size(); ++s) {
      loss += losses[s];
      if (shot_losses) shot_losses[s] = losses[s];
    }
    return loss;
  }

  void vjp(Real const* wavelets, Real const* residual, ModelingImages const& out, ForwardState<Real> const& start,
           VjpExtras<Real> const& more) override {
    KSWEEP_REQUIRE(residual, "vjp: no residual given");
    bool const stated = start.start_now || start.start_before || start.start_memory;
    KSWEEP_REQUIRE(!stated || !split(),
                   "vjp: a start state with a model split into domains (parallel.domains) is not supported; run it "
                   "on whole-model ranks");
    auto const n = padded_shape();
    auto const cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
    auto const memory = static_cast<std::size_t>(m_prop->memory_values());
    auto const at = [](auto* p, std::size_t per_shot, ShotBatch const& b) {
      return p ? p + per_shot * static_cast<std::size_t>(b.first) : p;
    };
    auto const img = images(out);
    auto const part = part_images(img);
    auto& e = engine();
    e.set_illuminations(out.illum_src || out.illum_rec);  // summed only when asked for
    auto const stopped = for_each_batch([&](ShotBatch const& b) {
      auto const w = wavelets_in(wavelets, b);
      auto const res = records_in(residual, b, "ksweep::fwi::residual");
      record_view const syn = batch_buffer("ksweep::fwi::vjp_synthetic", b.count, m_nt, m_nr);
      if (stated)
        m_prop->set_forward_state(at(start.start_now, cells, b), at(start.start_before, cells, b),
                                  at(start.start_memory, memory, b));
      e.forward(w, syn, stated);
      if (more.wavelet_grad) {
        auto const g = wavelets_out(more.wavelet_grad, b);
        e.backward(w, res, end_of(more.end, b), g);
        copy_out(g, more.wavelet_grad, b, m_ns * m_nt);
      } else {
        e.backward(w, res, end_of(more.end, b));
      }
      if (more.start_gradient()) {  // the adjoint state where the sweep ended: lambda^0, lambda^1
        Real* const before = at(more.start_before, cells, b);
        m_prop->get_adjoint_state(at(more.start_now, cells, b), before, at(more.start_memory, memory, b));
        if (before)
          for (std::size_t i = 0; i < cells * static_cast<std::size_t>(b.count); ++i) before[i] = -before[i];
      }
      keep_images(b, part);
    });
    reduce_images(part, img);
    images_out(img, out);
    if (more.wavelet_grad) gather_shots(more.wavelet_grad, static_cast<std::size_t>(m_ns) * m_nt);
    for (Real* p : std::array<Real*, 2>{more.start_now, more.start_before})
      if (p) gather_shots(p, cells);
    if (more.start_memory) gather_shots(more.start_memory, memory);
    if (stopped) std::rethrow_exception(stopped);
  }

  void born(Real const* wavelets, Real const* scatter, Real* records) override {
    KSWEEP_REQUIRE(scatter, "born: no velocity perturbation given");
    KSWEEP_REQUIRE(records || !parallel(), "born: no records array given (the ranks gather them there)");
    std::vector<Real> piece;
    if (split()) piece = core::extract(scatter, this->setup.grid, m_sub);
    auto const k = m_prop->born_scale(velocity(split() ? piece.data() : scatter, "ksweep::fwi::scatter"));
    auto const stopped = for_each_batch([&](ShotBatch const& b) {
      auto const w = wavelets_in(wavelets, b);
      auto const r = records_out(records, b, "ksweep::fwi::born_records");
      m_prop->born(w, k, r);
      copy_out(r, records, b, m_nt * m_nr);
    });
    gather_shots(records, static_cast<std::size_t>(m_nt) * m_nr);
    if (stopped) std::rethrow_exception(stopped);
  }

 private:
  // Whether the shots are shared over ranks (ModelingSetup::ranks of more than one rank, or a
  // split model): the members are then collective over them.
  bool parallel() const { return m_dec.has_value(); }
  bool split() const { return static_cast<bool>(m_halo); }
  // Every shot's `per_shot` values on every rank: zeros in the other shot groups' slots, put
  // together by a bitwise or (each slot has one writer, or writers of the same bits: the ranks
  // of a shot group).
  void gather_shots(Real* p, std::size_t per_shot) {
    if (!parallel()) return;
    std::fill(p, p + per_shot * m_mine.first, Real(0));
    std::fill(p + per_shot * (m_mine.first + m_mine.count), p + per_shot * m_shots, Real(0));
    m_ranks->allreduce_bor(p, per_shot * m_shots * sizeof(Real));
  }

  // The shots of this rank (all, or its shot group's: on a split model their points in its
  // subdomain), batch by batch. after_batch(done, of) counts them; where the shots are shared
  // over ranks an exception from it is returned instead of raised, so that the caller first
  // completes what every rank takes part in.
  template <class F>
  std::exception_ptr for_each_batch(F&& f) {
    KSWEEP_REQUIRE(m_velocity_set, (E::n_params > 1 ? "no model set: call set_model first"
                                                    : "no velocity set: call set_velocity first"));
    auto const& st = this->setup;
    std::exception_ptr stopped;
    int const end = m_mine.first + m_mine.count;
    for (int first = m_mine.first; first < end; first += m_batch) {
      ShotBatch const b{first, std::min(m_batch, end - first)};
      m_batch_first = first;
      std::vector<int> idx(static_cast<std::size_t>(b.count));
      for (int i = 0; i < b.count; ++i) idx[static_cast<std::size_t>(i)] = first + i;
      core::Survey const shots = b.count == m_shots ? st.survey : st.survey.select(idx);
      m_prop->set_survey(split() ? core::local_survey(shots, st.grid, m_domains, m_sub) : shots);
      f(b);
      m_space.fence();
      if (!this->after_batch || stopped) continue;
      if (!parallel()) {
        this->after_batch(first + b.count, m_shots);
        continue;
      }
      try {
        this->after_batch(first + b.count - m_mine.first, m_mine.count);
      } catch (...) {
        stopped = std::current_exception();
      }
    }
    return stopped;
  }

  // Images summed over the shots in shot order, the same bits on any number of ranks and any
  // batch: where no other rank adds to them, each batch's shots are added as they come;
  // otherwise this rank's shots are kept per shot (in the engine when they make one batch) and
  // added along the rank chain (comm::Communicator::sum_in_rank_order) after the last batch.
  bool chained() const { return parallel() && m_dec->group.size() > 1; }
  void keep_images(ShotBatch const& b, typename E::images_type const& part) {
    auto& e = engine();
    if (!chained()) return e.accumulate(part);
    if (m_mine.count <= m_batch) return;  // one batch: the engine keeps them
    using Kokkos::make_pair;
    using Kokkos::subview;
    std::array<typename E::shot_images, n_kept> from;
    from[0] = e.shot_gradient();
    from[1] = e.shot_illum_src();
    from[2] = e.shot_illum_rec();
    for (int p = 1; p < E::n_params; ++p) from[2 + p] = e.shot_gradient(p);
    for (int k = 0; k < n_kept; ++k) {
      if (m_kept[k].extent(0) == 0)
        m_kept[k] = typename E::shot_images(
            Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::shot_images")),
            m_mine.count, m_rows, m_nx);
      int const at = b.first - m_mine.first;
      Kokkos::deep_copy(m_space, subview(m_kept[k], make_pair(at, at + b.count), Kokkos::ALL, Kokkos::ALL),
                        subview(from[k], make_pair(0, b.count), Kokkos::ALL, Kokkos::ALL));
    }
  }
  // Public: nvcc requires the function enclosing an extended __host__ __device__ lambda to be.
 public:
  void add_kept(typename E::images_type const& part) {
    if (m_mine.count == 0) return;
    if (m_mine.count <= m_batch) return engine().accumulate(part);
    std::array<image, n_kept> to;
    to[0] = part.grad;
    to[1] = part.illum_src;
    to[2] = part.illum_rec;
    for (int p = 1; p < E::n_params; ++p) to[2 + p] = part.gradient(p);
    for (int k = 0; k < n_kept; ++k) {
      auto const v = to[k];
      auto const kept = m_kept[k];
      int const S = m_mine.count;
      launch_for(
          "ksweep::fwi::add_shot_images",
          Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(
              m_space, {0, 0}, {m_rows, m_nx}),
          KOKKOS_LAMBDA(int iz, int ix) {
            double a = v(iz, ix);
            for (int s = 0; s < S; ++s) a += kept(s, iz, ix);
            v(iz, ix) = a;
          });
    }
  }

 private:
  // Sums this rank's images (`part`, on its subdomain) over the shot groups and, on a split
  // model, puts the subdomains' parts together into `whole` (each cell from one rank: exact).
  void reduce_images(typename E::images_type const& part, typename E::images_type const& whole) {
    // The gradients: side by side with variable density, one view (the caller's array) otherwise.
    auto grads = [](typename E::images_type const& i) {
      if constexpr (E::n_params > 1) return i.grads;
      else return i.grad;
    };
    if (chained())
      m_dec->group.sum_in_rank_order(
          m_space, [&] { add_kept(part); }, grads(part), part.illum_src, part.illum_rec);
    if (!split()) return;
    auto const& g = this->setup.grid;
    std::size_t const cells = static_cast<std::size_t>(m_sub.cells()), all = static_cast<std::size_t>(g.cells());
    auto put = [&](auto const& from, auto const& to) {
      using V = Kokkos::View<double*, memory_space, Kokkos::MemoryUnmanaged>;
      launch_for("ksweep::fwi::gather_images", Kokkos::RangePolicy<ExecSpace>(m_space, 0, cells),
                 subdomain_copy(V(from.data(), cells), V(to.data(), all), g, m_sub, true));
    };
    put(part.grad, whole.grad);
    put(part.illum_src, whole.illum_src);
    put(part.illum_rec, whole.illum_rec);
    bitwise_or(m_space, m_dec->domain, whole.grad);
    bitwise_or(m_space, m_dec->domain, whole.illum_src);
    bitwise_or(m_space, m_dec->domain, whole.illum_rec);
  }

  typename P::velocity_view velocity(Real const* v, char const* label) {
    if (in_place()) {
      return typename P::velocity_view(v, m_rows, m_nx);
    } else {
      Kokkos::View<Real**, Kokkos::LayoutRight, memory_space> d(
          Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string(label)), m_rows, m_nx);
      Kokkos::View<Real const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(
          v, m_rows, m_nx);
      Kokkos::deep_copy(m_space, d, h);
      return d;
    }
  }

  // A view of `n1` x `n2` values per shot of the batch: the caller's (host backends) or a device
  // copy of them (`upload`) or a device buffer.
  record_view view_of(Real const* p, ShotBatch const& b, int n1, int n2, char const* label, bool upload) {
    std::size_t const off = static_cast<std::size_t>(b.first) * n1 * n2;
    if (p && in_place()) return record_view(const_cast<Real*>(p) + off, b.count, n1, n2);
    record_view d = batch_buffer(label, b.count, n1, n2);
    if (upload && p) Kokkos::deep_copy(m_space, d, host3(const_cast<Real*>(p) + off, b.count, n1, n2));
    return d;
  }
  // The device buffer of `label` for a batch: the last batch's when the extents match, so that
  // a batch's runs of steps launch on the buffers of the last one's and replay their graphs
  // (core/step_graph.hpp); kept for the modelling's life.
  record_view batch_buffer(char const* label, int n0, int n1, int n2) {
    record_view& d = m_batch_buffers[label];
    if (static_cast<int>(d.extent(0)) != n0 || static_cast<int>(d.extent(1)) != n1 ||
        static_cast<int>(d.extent(2)) != n2) {
      d = record_view();  // the old one goes first
      d = record_view(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string(label)), n0, n1, n2);
    }
    return d;
  }
  wavelet_view wavelets_in(Real const* p, ShotBatch const& b) {
    KSWEEP_REQUIRE(p, "no wavelets (source amplitudes) given");
    return view_of(p, b, m_ns, m_nt, "ksweep::fwi::wavelets", true);
  }
  wavelet_view wavelets_out(Real* p, ShotBatch const& b) {
    return view_of(p, b, m_ns, m_nt, "ksweep::fwi::wavelet_grad", false);
  }
  record_view records_in(Real const* p, ShotBatch const& b, char const* label) {
    return view_of(p, b, m_nt, m_nr, label, true);
  }
  record_view records_out(Real* p, ShotBatch const& b, char const* label) {
    return view_of(p, b, m_nt, m_nr, label, false);
  }
  void copy_out(record_view const& d, Real* p, ShotBatch const& b, int per_shot) {
    if (!p || d.data() == p + static_cast<std::size_t>(b.first) * per_shot) return;  // written in place
    Kokkos::deep_copy(
        m_space, host3(p + static_cast<std::size_t>(b.first) * per_shot, d.extent(0), d.extent(1), d.extent(2)), d);
    m_space.fence();
  }

  // The batch's part of the gradient with respect to the end state (whole model: Modeling checks).
  core::AdjointEnd<Real> end_of(EndGradient<Real> const& end, ShotBatch const& b) const {
    auto const n = padded_shape();
    auto const cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
    auto const memory = static_cast<std::size_t>(m_prop->memory_values());
    auto const at = [&b](Real const* p, std::size_t per_shot) {
      return p ? p + per_shot * static_cast<std::size_t>(b.first) : p;
    };
    return {at(end.now, cells), at(end.before, cells), at(end.memory, memory)};
  }

  E& engine() {
    if (!m_engine) {
      m_engine = std::make_unique<E>(*m_prop, this->setup.storage);
      // The exact gradient of the records as a function of the model: with the layer a copy of
      // the edge cells (no separate layer velocity) its chain rule is taken.
      m_engine->set_layer_chain(true);
    }
    m_engine->set_cross_correlation(this->cross_correlation);
    if (this->reverse_watch) {
      m_engine->set_reverse_watch(
          [this](int n) {
            ReverseView<Real> v;
            v.step = n;
            v.first_shot = m_batch_first;
            v.shots = m_prop->n_shots();
            v.get = [this](Real* now, Real* next) { m_prop->get_adjoint_state(now, next); };
            v.set = [this](Real const* now, Real const* next) { m_prop->set_adjoint_state(now, next); };
            v.set_memory = [this](Real const* memory) { m_prop->set_adjoint_state(nullptr, nullptr, memory); };
            v.memory = [this](Real* memory) { m_prop->get_adjoint_state(nullptr, nullptr, memory); };
            v.images = [this](ModelingImages const& out) {
              auto const img = images(out);
              m_engine->accumulate_so_far(img);
              images_out(img, out);
            };
            this->reverse_watch(v);
          },
          this->reverse_watch_steps);
    } else {
      m_engine->set_reverse_watch(nullptr);
    }
    return *m_engine;
  }

  // The images to accumulate into, zeroed: the caller's arrays (host backends) or device ones.
  typename E::images_type images(ModelingImages const& out) {
    if constexpr (E::n_params > 1) {  // the gradients live side by side: the caller's are separate arrays
      return typename E::images_type(m_space, m_whole_rows, m_whole_nx, E::n_params);
    }
    typename E::images_type img;
    auto one = [&](double* p, char const* label) {
      image v;
      if (p && in_place()) v = image(p, m_whole_rows, m_whole_nx);
      if (!v.data()) v = image(Kokkos::view_alloc(m_space, std::string(label)), m_whole_rows, m_whole_nx);
      else Kokkos::deep_copy(m_space, v, 0.0);
      return v;
    };
    img.grad = one(out.grad.empty() ? nullptr : out.grad[0], "ksweep::fwi::grad");
    img.illum_src = one(out.illum_src, "ksweep::fwi::illum_src");
    img.illum_rec = one(out.illum_rec, "ksweep::fwi::illum_rec");
    return img;
  }
  // The images of this rank's subdomain (zeroed), or `whole` itself on a whole model.
  typename E::images_type part_images(typename E::images_type const& whole) {
    if (!split()) return whole;
    return typename E::images_type(m_space, m_rows, m_nx, E::n_params);
  }
  void images_out(typename E::images_type const& img, ModelingImages const& out) {
    auto one = [&](image const& v, double* p) {
      if (!p || v.data() == p) return;
      if (device_arrays()) Kokkos::deep_copy(m_space, device_images(p, m_whole_rows, m_whole_nx), v);
      else Kokkos::deep_copy(m_space, host_images(p, m_whole_rows, m_whole_nx), v);
    };
    for (std::size_t p = 0; p < out.grad.size() && p < static_cast<std::size_t>(E::n_params); ++p)
      one(p == 0 ? img.grad : img.gradient(static_cast<int>(p)), out.grad[p]);  // grad: the caller's, in place
    one(img.illum_src, out.illum_src);
    one(img.illum_rec, out.illum_rec);
    m_space.fence();
  }

  // The velocity of a physics built on the device: whole, or this rank's subdomain of it.
  void set_velocity(Real const* vp, Real const* layer) {
    if (split()) {
      // The subdomain's cells, with the damping profiles of the whole model's (or layer's) maximum.
      auto const& st = this->setup;
      Real const* const outer = layer ? layer : vp;
      // The configured profile velocity (PmlConfig::profile_velocity), or the whole model's maximum.
      double const vmax = st.pml.profile_velocity > 0
                              ? st.pml.profile_velocity
                              : static_cast<double>(*std::max_element(outer, outer + st.grid.cells()));
      m_prop->set_profile_velocity(vmax);
      m_part = core::extract(vp, st.grid, m_sub);
      if (layer) {
        m_layer_part = core::extract(layer, st.grid, m_sub);
        m_prop->set_velocity(velocity(m_layer_part.data(), "ksweep::fwi::layer_velocity"), true);
        m_prop->set_velocity(velocity(m_part.data(), "ksweep::fwi::velocity"), false);
      } else {
        m_prop->set_velocity(velocity(m_part.data(), "ksweep::fwi::velocity"), true);
      }
    } else if (layer) {
      m_prop->set_velocity(velocity(layer, "ksweep::fwi::layer_velocity"), true);
      m_prop->set_velocity(velocity(vp, "ksweep::fwi::velocity"), false);
    } else {
      m_prop->set_velocity(velocity(vp, "ksweep::fwi::velocity"), true);
    }
  }

  ExecSpace m_space;
  std::unique_ptr<P> m_prop;
  std::unique_ptr<E> m_engine;
  std::map<std::string, record_view> m_batch_buffers;  // batch_buffer()
  int m_shots = 0, m_ns = 0, m_nr = 0, m_nt = 0, m_batch = 0, m_rows = 0, m_nx = 0;
  int m_whole_rows = 0, m_whole_nx = 0;
  int m_batch_first = 0;  // the first shot of the batch running (ReverseView::first_shot)  // the whole model's
                          // (m_rows, m_nx: this rank's subdomain's)
  bool m_velocity_set = false;
  // Shots over ranks: the ranks, their shot groups, and on a split model this rank's subdomain
  // and its cells and the link to its neighbours; the shots of this rank's group (the whole
  // survey otherwise).
  // (optional: a default communicator would ask every rank of the world, and this object may
  // live on one rank alone)
  std::optional<comm::Communicator> m_ranks;
  std::optional<Decomposition> m_dec;
  core::DomainSplit m_domains;  // the setup's, its cuts aligned to the storage's codec blocks
  core::Subdomain m_sub;
  std::vector<Real> m_part, m_layer_part;  // this subdomain's cells of the model and of the layer's model
  std::shared_ptr<comm::HaloExchange<Real, ExecSpace>> m_halo;
  ShotBatch m_mine;
  // This rank's shot images over its batches (keep_images): the gradient, the illuminations, the
  // gradients of the physics' other parameters.
  static constexpr int n_kept = 2 + E::n_params;
  std::array<typename E::shot_images, n_kept> m_kept;
};

}  // namespace impl

template <class Real, int Order, int Dim, class Physics>
std::unique_ptr<typename Modeling<Real>::Impl> make_modeling(ModelingSetup setup) {
  return std::make_unique<impl::ModelingRun<Real, Order, Dim, Physics>>(std::move(setup));
}

}  // namespace ksweep::fwi
