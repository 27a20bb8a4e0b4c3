#pragma once
// The inversion of one stencil order, dimension and physics (see inversion.hpp); instantiated
// in fwi_2d.cpp, fwi_3d.cpp, fwi_vd_2d.cpp and fwi_vd_3d.cpp (with the modelling).

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/batches.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/gradient.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/core/profiling.hpp>
#include <ksweep/core/propagator.hpp>
#include "inversion_run.hpp"
#include <ksweep/fwi/domains.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/lbfgs.hpp>
#include <ksweep/fwi/optimizer.hpp>
#include <ksweep/fwi/smoothing.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace ksweep::fwi {

namespace impl {

/// Whether Options::fault asks for `what` to be non-finite at iteration `t`.
inline bool fault_at(std::string const& fault, char const* what, int t) {
  auto const colon = fault.find(':');
  return colon != std::string::npos && fault.substr(0, colon) == what && std::atoi(fault.c_str() + colon + 1) == t;
}

/// A host copy of the device view `v` (copied on `space`, which is fenced).
template <class ExecSpace, class View>
auto to_host(ExecSpace const& space, View const& v) {
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  Kokkos::deep_copy(space, h, v);
  space.fence();
  return h;
}

/// The device view `v` as floats (models, moments and images leave as float32).
template <class ExecSpace, class View>
std::vector<float> to_host_floats(ExecSpace const& space, View const& v) {
  auto const h = to_host(space, v);
  std::vector<float> out(h.span());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(h.data()[i]);
  return out;
}

/// Sum of squared differences x - y, formed in Real, per row of `ncols` cells in order (rows in
/// parallel), then the rows in order: the same bits whatever the number of threads.
template <class ExecSpace, class View, class Sums>
double squared_distance(ExecSpace const& space, View const& x, View const& y, Sums const& row_sums, int ncols) {
  using Real = typename View::non_const_value_type;
  int const rows = static_cast<int>(row_sums.extent(0));
  launch_for(
      "ksweep::fwi::rmse_rows", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(int iz) {
        double acc = 0;
        for (int ix = 0; ix < ncols; ++ix) {
          std::size_t const i = static_cast<std::size_t>(iz) * ncols + ix;
          Real const d = x(i) - y(i);
          double const e = static_cast<double>(d);
          acc += e * e;
        }
        row_sums(iz) = acc;
      });
  auto const h = to_host(space, row_sums);
  double sum = 0;
  for (int iz = 0; iz < rows; ++iz) sum += h(iz);
  return sum;
}

/// The optimizer `o` asks for, over `n` values within `box` (one interface: the inversion holds
/// no branch per optimizer).
template <class Real, class ExecSpace>
std::unique_ptr<Optimizer<Real, ExecSpace>> make_optimizer(ExecSpace const& space, std::size_t n, Options const& o,
                                                           Box const& box) {
  if (o.method == Method::lbfgs) return std::make_unique<Lbfgs<Real, ExecSpace>>(space, n, o.lbfgs, box);
  return std::make_unique<Adam<Real, ExecSpace>>(space, n, o.adam, box);
}

/// The inversion of stencil order `Order`, dimension `Dim` and physics `Physics`. The optimizer's
/// vector stacks the inverted parameters [parameter][cell] (Options::invert's order); the others
/// are held in m_fixed_params.
template <int Order, int Dim, class Physics>
class Run final : public Inversion::Impl {
 public:
  using Real = float;
  using ExecSpace = Kokkos::DefaultExecutionSpace;
  using P = core::Propagator<Real, Order, ExecSpace, Dim, Physics>;
  using E = core::GradientEngine<Real, Order, ExecSpace, Dim, Physics>;
  static constexpr int n_params = E::n_params;
  using vec = Kokkos::View<Real*, ExecSpace::memory_space>;
  using Clock = std::chrono::steady_clock;

  Run(Problem problem, Options options, comm::Communicator const& comm)
      : m_pb(std::move(problem)), m_opt(std::move(options)), m_comm(comm) {
    using Kokkos::view_alloc;
    using Kokkos::WithoutInitializing;
    auto const& g = m_pb.grid;
    m_rows = static_cast<int>(g.rows());
    m_nx = g.nx;
    m_n = static_cast<std::size_t>(g.cells());
    m_plane = static_cast<std::size_t>(m_rows / g.nz) * g.nx;
    m_shots = m_pb.survey.n_shots;
    m_nr = m_pb.survey.n_receivers;
    if (m_opt.method == Method::lbfgs) m_opt.batch = m_shots;  // full batch (the options checked by Inversion)
    // A split model: shot groups of one rank per subdomain (checked before any allocation).
    m_split = m_opt.domains.split();
    if (m_split) {
      KSWEEP_REQUIRE(Physics::row.splits, "parallel.domains = " << core::describe(m_opt.domains, Dim) << ": physics \""
                                                                << Physics::name << "\" (" << Physics::row.summary
                                                                << ") does not run on a split model yet");
      // Cuts where the storage's codec blocks end, so that they code alike on every split.
      m_opt.domains.align = core::cut_alignment(core::Layout(g, m_pb.pml, Order, P::R),
                                                m_opt.storage.strategy == storage::Strategy::full, m_opt.storage.dtype);
      m_dec = decompose(comm, m_opt.domains, g, P::R);
      m_sub = core::subdomain(g, m_pb.pml, m_opt.domains, m_dec.domain_index,
                              *std::max_element(m_pb.start[0].begin(), m_pb.start[0].end()));
    }
    m_groups = m_split ? m_dec.groups : comm.size();
    m_group = m_split ? m_dec.group_index : comm.rank();
    m_fixed = static_cast<std::size_t>(m_opt.water_rows) * m_plane;
    // The inverted parameters in the optimizer's vector; the others held.
    auto const& params = physics_parameters(m_pb.physics);
    for (auto const& name : m_opt.invert) m_inverted.push_back(parameter_index(m_pb.physics, name));
    std::size_t const nv = m_inverted.size() * m_n;
    m_model = vec(view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::model")), nv);
    Box& box = m_box;
    box.cells = m_inverted.size() > 1 ? m_n : 0;
    box.fixed = m_fixed;
    for (int p = 0; p < n_params; ++p) {
      int const k = slot(p);
      auto const& values = m_pb.start[static_cast<std::size_t>(p)];
      std::string const name = params[static_cast<std::size_t>(p)].name;
      if (k >= 0) {
        copy_in(values, segment(m_model, k));
        Bounds const b = bounds_of(m_opt, p);
        box.lo[k] = b.min;
        box.hi[k] = b.max;
        box.lr[k] = b.lr > 0 ? b.lr : m_opt.adam.lr;
      } else {
        m_held[p] = upload(values, ("ksweep::fwi::" + name + "_held").c_str());
      }
      if (static_cast<std::size_t>(p) < m_pb.truth.size() && !m_pb.truth[static_cast<std::size_t>(p)].empty())
        m_truth[p] = upload(m_pb.truth[static_cast<std::size_t>(p)], ("ksweep::fwi::true_" + name).c_str());
    }
    m_grad = vec(view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::grad")), nv);
    restart_optimizer();
    m_cap = (m_opt.batch + m_groups - 1) / m_groups;
    m_prop = std::make_unique<P>(m_space, m_split ? m_sub.grid : g, m_split ? m_sub.pml : m_pb.pml, m_pb.dt, m_cap);
    m_prop->set_schedule(m_opt.schedule);
    if (m_split) {
      m_halo = link_halo(*m_prop, m_dec, m_sub);
      m_part = vec(view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::model_part")),
                   static_cast<std::size_t>(m_sub.cells()));
    }
    m_engine = std::make_unique<E>(*m_prop, m_opt.storage);
    m_img = typename E::images_type(m_space, m_rows, m_nx, n_params);
    if (m_split)
      m_img_part = typename E::images_type(m_space, static_cast<int>(m_sub.grid.rows()), m_sub.grid.nx, n_params);
    m_w = typename P::wavelet_view(view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::wavelets")),
                                   m_cap, 1, m_pb.nt);
    upload_wavelet();
    m_scale = m_opt.loss_sum ? 1.0 : 1.0 / (static_cast<double>(m_opt.batch) * m_pb.nt * m_nr);
    m_rng.seed(m_opt.seed);
    m_row_sums = Kokkos::View<double*, ExecSpace::memory_space>(
        view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::row_sums")), m_rows);
    for (auto* v : {&m_pb.start, &m_pb.truth}) {
      v->clear();
      v->shrink_to_fit();
    }
  }

  /// Every slot of the batch's wavelets from m_pb.wavelet.
  void upload_wavelet() {
    auto wh = Kokkos::create_mirror_view(Kokkos::HostSpace(), m_w);
    for (int s = 0; s < m_cap; ++s)
      for (int t = 0; t < m_pb.nt; ++t) wh(s, 0, t) = static_cast<Real>(m_pb.wavelet[static_cast<std::size_t>(t)]);
    Kokkos::deep_copy(m_space, m_w, wh);
    m_space.fence();
  }

  void restart_optimizer() override {
    m_optimizer.reset();  // its memory before the new one's
    m_optimizer = make_optimizer<Real, ExecSpace>(m_space, m_model.extent(0), m_opt, m_box);
    m_space.fence();
  }

  void set_data(std::vector<double> wavelet, std::vector<float> observed) override {
    KSWEEP_REQUIRE(
        wavelet.size() == static_cast<std::size_t>(m_pb.nt),
        "ksweep::fwi::Inversion::set_data: a wavelet of " << wavelet.size() << " samples for nt = " << m_pb.nt);
    auto const samples = static_cast<std::size_t>(m_shots) * m_pb.nt * m_nr;
    KSWEEP_REQUIRE(observed.size() == samples,
                   "ksweep::fwi::Inversion::set_data: " << observed.size() << " observed samples, the survey has "
                                                        << samples << " ([shots, nt, receivers] = [" << m_shots << ", "
                                                        << m_pb.nt << ", " << m_nr << "])");
    m_pb.wavelet = std::move(wavelet);
    m_pb.observed = std::move(observed);
    upload_wavelet();
  }

  /// The position of parameter p in the optimizer's vector (-1: held fixed).
  int slot(int p) const {
    for (std::size_t k = 0; k < m_inverted.size(); ++k)
      if (m_inverted[k] == p) return static_cast<int>(k);
    return -1;
  }
  /// The k-th segment of m_n cells of a stacked vector.
  vec segment(vec const& v, int k) const {
    auto const first = static_cast<std::size_t>(k) * m_n;
    return Kokkos::subview(v, Kokkos::make_pair(first, first + m_n));
  }
  /// Parameter p of the model `x` (the optimizer's vector or a trial point of it).
  vec parameter(vec const& x, int p) const {
    int const k = slot(p);
    return k >= 0 ? segment(x, k) : m_held[p];
  }

  void restore(State const& s) override {
    KSWEEP_REQUIRE(s.iteration >= 0, "ksweep::fwi::Inversion::restore: iteration " << s.iteration << " must be >= 0");
    auto const& params = physics_parameters(m_pb.physics);
    KSWEEP_REQUIRE(s.model.size() == params.size(), "ksweep::fwi::Inversion::restore: a model of "
                                                        << s.model.size() << " field(s), physics \""
                                                        << to_string(m_pb.physics) << "\" has " << params.size()
                                                        << " parameter(s)");
    for (int p = 0; p < n_params; ++p) {
      auto const& v = s.model[static_cast<std::size_t>(p)];
      KSWEEP_REQUIRE(v.size() == m_n, "ksweep::fwi::Inversion::restore: a model whose "
                                          << params[static_cast<std::size_t>(p)].name << " has " << v.size()
                                          << " cells for a grid of " << m_n);
    }
    for (int p = n_params - 1; p >= 0; --p) copy_in(s.model[static_cast<std::size_t>(p)], parameter(m_model, p));
    // Adam's steps since its start: the iteration count when the state does not say.
    m_optimizer->restore(m_space,
                         {s.optimizer_steps >= 0 ? s.optimizer_steps : s.iteration, s.first, s.second, s.lbfgs});
    std::istringstream is(s.rng);
    is >> m_rng;
    KSWEEP_REQUIRE(!is.fail(), "ksweep::fwi::Inversion::restore: the generator state is not a std::mt19937_64's");
    m_iteration = s.iteration;
    m_space.fence();
  }

  Report step() override {
    auto const t0 = Clock::now();
    Report r;
    r.iteration = m_iteration + 1;
    {
      core::ScopedRegion region("ksweep::fwi::model");
      if (m_optimizer->full_batch()) {  // every shot: the loss is one function of the model
        r.shots.resize(static_cast<std::size_t>(m_shots));
        for (int s = 0; s < m_shots; ++s) r.shots[static_cast<std::size_t>(s)] = s;
      } else {
        if (m_comm.is_root()) r.shots = core::draw_batch(m_rng, m_shots, m_opt.batch);
        m_comm.broadcast(r.shots);
      }
    }
    auto const res = m_optimizer->iterate(
        m_space, m_model, m_grad, [&](vec const& x, vec const& g) { return evaluate(r.shots, r.iteration, x, g); });
    r.loss = res.loss;
    r.loss_start = res.start_loss;
    r.evaluations = res.evaluations;
    core::ScopedRegion region("ksweep::fwi::optimizer");
    std::string why;
    if (std::size_t const bad = m_optimizer->non_finite(m_space, why))
      throw IterationError(why + " at iteration " + std::to_string(r.iteration) + " (" + std::to_string(bad) +
                           " non-finite values): the gradient's scale is extreme, likely from observed data of extreme "
                           "amplitude (check their scale; the loss is " +
                           std::to_string(r.loss) + ")");
    if (fault_at(m_opt.fault, "model", r.iteration))
      Kokkos::deep_copy(m_space, Kokkos::subview(m_model, m_n / 2), Real(std::nan("")));
    if (std::size_t const bad = count_non_finite(m_space, m_model))
      throw IterationError("the model after the " + std::string(m_optimizer->name()) + " step of iteration " +
                           std::to_string(r.iteration) + " is non-finite (NaN or infinite) in " + std::to_string(bad) +
                           " of " + std::to_string(m_n) +
                           " cells; likely causes: fwi.eps too small for the gradient's scale, or fwi.lr too large");
    r.rmse = rmse(nullptr);
    m_space.fence();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ++m_iteration;
    return r;
  }

  int iteration() const override { return m_iteration; }

  State state() const override {
    State s;
    s.iteration = m_iteration;
    std::ostringstream os;
    os << m_rng;
    s.rng = os.str();
    s.model = model();
    auto o = m_optimizer->state(m_space);
    s.optimizer_steps = o.steps;
    s.first = std::move(o.first);
    s.second = std::move(o.second);
    s.lbfgs = std::move(o.lbfgs);
    return s;
  }

  Fields model() const override {
    Fields f;
    for (int p = 0; p < n_params; ++p) f.push_back(to_host_floats(m_space, parameter(m_model, p)));
    return f;
  }

  void set_illuminations(bool on) override { m_illum = on; }
  // The illuminations are summed: asked for, or the preconditioning's.
  bool illuminations() const { return m_illum || m_opt.precondition; }

  Images images() const override {
    Images im;
    for (int p = 0; p < n_params; ++p) im.grad.push_back(to_host_floats(m_space, m_img.gradient(p)));
    im.illum_src = to_host_floats(m_space, m_img.illum_src);
    im.illum_rec = to_host_floats(m_space, m_img.illum_rec);
    return im;
  }

  std::vector<double> rmse(Fields const* model) const override {
    auto const& params = physics_parameters(m_pb.physics);
    if (model)
      KSWEEP_REQUIRE(model->size() == params.size(), "ksweep::fwi::Inversion::rmse: a model of "
                                                         << model->size() << " field(s), physics \""
                                                         << to_string(m_pb.physics) << "\" has " << params.size()
                                                         << " parameter(s)");
    std::vector<double> r;
    for (int p = 0; p < n_params; ++p) {
      if (!model) {
        r.push_back(rmse_of(parameter(m_model, p), p));
        continue;
      }
      auto const& v = (*model)[static_cast<std::size_t>(p)];
      KSWEEP_REQUIRE(v.size() == m_n, "ksweep::fwi::Inversion::rmse: a model whose "
                                          << params[static_cast<std::size_t>(p)].name << " has " << v.size()
                                          << " cells for a grid of " << m_n);
      r.push_back(m_truth[p].extent(0) == 0 ? std::numeric_limits<double>::quiet_NaN()
                                            : rmse_of(upload(v, "ksweep::fwi::rmse_model"), p));
    }
    return r;
  }

  core::MemoryReport memory() const override { return m_memory; }

  // The machinery of an iteration: public, since CUDA's extended lambdas may not live in private
  // member functions (this class is the implementation behind Inversion, not an interface).
  vec upload(std::vector<float> const& h, char const* label) const {
    vec d(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string(label)), h.size());
    copy_in(h, d);
    return d;
  }

  void copy_in(std::vector<float> const& h, vec const& d) const {
    auto mh = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
    for (std::size_t i = 0; i < h.size(); ++i) mh(i) = static_cast<Real>(h[i]);
    Kokkos::deep_copy(m_space, d, mh);
    m_space.fence();  // before the mirror goes
  }

  double rmse_of(vec const& x, int p) const {
    if (m_truth[p].extent(0) == 0) return std::numeric_limits<double>::quiet_NaN();
    return std::sqrt(squared_distance(m_space, x, m_truth[p], m_row_sums, m_nx) / static_cast<double>(m_n));
  }

  // A split model: this subdomain's cells of `x`, with the damping of the whole model's maximum
  // velocity (constant density).
  void set_part(vec const& x) {
    if (!m_split) return;
    // This subdomain's cells, with the damping of the whole model's maximum velocity.
    auto const v = parameter(x, 0);
    Real vmax = 0;
    launch_reduce(
        "ksweep::fwi::model_max", Kokkos::RangePolicy<ExecSpace>(m_space, 0, m_n),
        KOKKOS_LAMBDA(std::size_t i, Real & mx) { mx = v(i) > mx ? v(i) : mx; }, Kokkos::Max<Real>(vmax));
    launch_for("ksweep::fwi::model_part", Kokkos::RangePolicy<ExecSpace>(m_space, 0, m_part.extent(0)),
               subdomain_copy(m_part, v, m_pb.grid, m_sub, false));
    // The configured profile velocity (PmlConfig::profile_velocity), or the whole model's maximum.
    m_prop->set_profile_velocity(m_pb.pml.profile_velocity > 0 ? m_pb.pml.profile_velocity : static_cast<double>(vmax));
    m_prop->set_velocity(typename P::velocity_view(m_part.data(), static_cast<int>(m_sub.grid.rows()), m_sub.grid.nx));
  }

  // The propagator's model from the vector `x`: a physics whose coefficients are built on the
  // device (constant density: its velocity) keeps the model there; one built on the host
  // (Propagator::set_model; variable density) gets its parameters there, one field each.
  void set_model(vec const& x) {
    if constexpr (P::coefficients_type::on_device) {
      static_assert(n_params == 1, "a device-built model is the velocity alone");
      set_part(x);
      if (!m_split) m_prop->set_velocity(typename P::velocity_view(x.data(), m_rows, m_nx));
    } else {
      std::array<std::vector<float>, n_params> host;
      std::array<float const*, n_params> fields{};
      for (int p = 0; p < n_params; ++p) {
        host[static_cast<std::size_t>(p)] = to_host_floats(m_space, parameter(x, p));
        fields[static_cast<std::size_t>(p)] = host[static_cast<std::size_t>(p)].data();
      }
      m_prop->set_model(fields);
    }
  }

  // The loss of the batch `shots` at the model `x` and its conditioned gradient into `g`; every
  // rank returns the same loss and holds the same gradient.
  double evaluate(std::vector<int> const& shots, int t, vec const& x, vec const& g) {
    using Kokkos::view_alloc;
    using Kokkos::WithoutInitializing;
    int const nt = m_pb.nt, nr = m_nr;
    auto const slice = comm::slice_of(static_cast<int>(shots.size()), m_group, m_groups);
    std::vector<double> shot_loss(shots.size(), 0.0);  // this rank's slots only
    typename P::record_view ob, syn;
    {
      core::ScopedRegion region("ksweep::fwi::model");
      Kokkos::deep_copy(m_space, m_img.grads, 0.0);
      Kokkos::deep_copy(m_space, m_img.illum_src, 0.0);
      Kokkos::deep_copy(m_space, m_img.illum_rec, 0.0);
      if (m_split) {
        Kokkos::deep_copy(m_space, m_img_part.grads, 0.0);
        Kokkos::deep_copy(m_space, m_img_part.illum_src, 0.0);
        Kokkos::deep_copy(m_space, m_img_part.illum_rec, 0.0);
      }
      if (slice.count > 0) {
        std::vector<int> const mine(shots.begin() + slice.first, shots.begin() + slice.first + slice.count);
        auto const batch = m_pb.survey.select(mine);
        m_prop->set_survey(m_split ? core::local_survey(batch, m_pb.grid, m_opt.domains, m_sub) : batch);
        try {
          set_model(x);
        } catch (Error const& e) {
          std::string kept;
          for (auto const& q : physics_parameters(m_pb.physics))
            kept += std::string(kept.empty() ? "" : " and ") + "the " + q.plural + " in [fwi." + q.min_key + ", fwi." +
                    q.max_key + "]";
          throw Error("the model of iteration " + std::to_string(t) + " cannot be propagated: " + e.what() +
                      "; the inversion keeps " + kept + ", so this is a fault of the run, not of the inputs");
        }
        ob = typename P::record_view(view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::observed")),
                                     slice.count, nt, nr);  // written in full from the host below
        syn = typename P::record_view(view_alloc(m_space, WithoutInitializing, std::string("ksweep::fwi::synthetic")),
                                      slice.count, nt, nr);
        Kokkos::deep_copy(m_space, syn, Real(0));
        auto oh = Kokkos::create_mirror_view(Kokkos::HostSpace(), ob);
        for (int s = 0; s < slice.count; ++s)
          for (int it = 0; it < nt; ++it)
            for (int r = 0; r < nr; ++r)
              oh(s, it, r) = static_cast<Real>(
                  m_pb.observed[(static_cast<std::size_t>(mine[static_cast<std::size_t>(s)]) * nt + it) * nr + r]);
        Kokkos::deep_copy(m_space, ob, oh);
        m_space.fence();  // before the mirror goes
      }
    }
    // This rank's shots: forward and backward passes (regions of the gradient engine).
    if (slice.count > 0) {
      auto wb = Kokkos::subview(m_w, Kokkos::make_pair(0, slice.count), Kokkos::ALL, Kokkos::ALL);
      m_engine->set_illuminations(illuminations());
      m_engine->compute(wb, ob, m_scale, syn);
      for (int s = 0; s < slice.count; ++s)
        shot_loss[static_cast<std::size_t>(slice.first + s)] = m_engine->shot_losses()[static_cast<std::size_t>(s)];
      m_memory = m_engine->memory_report(ob.span() * sizeof(Real), syn.span() * sizeof(Real));
    }
    // Sum over ranks, shot by shot in batch order, so that the sums (and hence the model) are the
    // same bits whatever the number of ranks: images along the rank chain, losses gathered (each
    // slot is filled by one rank, so the sum over ranks is exact) and added in order.
    double loss = 0;
    {
      core::ScopedRegion region("ksweep::fwi::reduction");
      // Without illuminations the ranks pass the gradients alone (theirs stay zero).
      auto const add = [&] {
        if (slice.count > 0) m_engine->accumulate(m_img);
      };
      if (!m_split && illuminations()) {
        m_comm.sum_in_rank_order(m_space, add, m_img.grads, m_img.illum_src, m_img.illum_rec);
      } else if (!m_split) {
        m_comm.sum_in_rank_order(m_space, add, m_img.grads);
      } else {
        // A split model: over the shot groups in group order on this subdomain, then the
        // subdomains' parts into the whole images (each cell from one rank: exact).
        m_dec.group.sum_in_rank_order(
            m_space,
            [&] {
              if (slice.count > 0) m_engine->accumulate(m_img_part);
            },
            m_img_part.grads, m_img_part.illum_src, m_img_part.illum_rec);
        gather_images();
        // Every rank of a shot group holds its shots' misfits: one rank per group adds them.
        if (m_dec.domain_index != 0) std::fill(shot_loss.begin(), shot_loss.end(), 0.0);
      }
      m_comm.allreduce_sum(shot_loss.data(), shot_loss.size());
      for (double v : shot_loss) loss += v;
    }
    // Conditioning, per inverted parameter: water rows fixed, optional smoothing and
    // illumination preconditioning.
    core::ScopedRegion region("ksweep::fwi::optimizer");
    std::size_t const n = m_n, nv = g.extent(0);
    Kokkos::View<double*, ExecSpace::memory_space, Kokkos::MemoryUnmanaged> isrc(m_img.illum_src.data(), n);
    for (std::size_t k = 0; k < m_inverted.size(); ++k) {
      Kokkos::View<double*, ExecSpace::memory_space, Kokkos::MemoryUnmanaged> gd(m_img.gradient(m_inverted[k]).data(),
                                                                                 n);
      auto const gk = segment(g, static_cast<int>(k));
      launch_for(
          "ksweep::fwi::gradient_to_real", Kokkos::RangePolicy<ExecSpace>(m_space, 0, n),
          KOKKOS_LAMBDA(std::size_t i) { gk(i) = static_cast<Real>(gd(i)); });
    }
    // Non-finite numbers stop the run before anything of this iteration is visible.
    if (fault_at(m_opt.fault, "loss", t)) loss = std::nan("");
    if (fault_at(m_opt.fault, "gradient", t)) Kokkos::deep_copy(m_space, Kokkos::subview(g, n / 2), Real(std::nan("")));
    if (!std::isfinite(loss))
      throw IterationError("the loss of iteration " + std::to_string(t) + " is " + std::to_string(loss) +
                           ": the synthetic data or the residual overflowed; likely causes: observed data of extreme "
                           "amplitude (check their scale), or a model that became unstable");
    if (std::size_t const bad = count_non_finite(m_space, g))
      throw IterationError("the gradient of iteration " + std::to_string(t) + " is non-finite (NaN or infinite) in " +
                           std::to_string(bad) + " of " + std::to_string(nv) +
                           " values: the adjoint wavefield overflowed; likely causes: observed data of extreme "
                           "amplitude, or fwi.loss_norm = \"sum\" on large data");
    double damp = 0;
    if (m_opt.precondition) {
      double imax = 0;
      launch_reduce(
          "ksweep::fwi::illum_max", Kokkos::RangePolicy<ExecSpace>(m_space, 0, n),
          KOKKOS_LAMBDA(std::size_t i, double& mx) { mx = isrc(i) > mx ? isrc(i) : mx; }, Kokkos::Max<double>(imax));
      damp = 1e-3 * imax;
    }
    for (std::size_t k = 0; k < m_inverted.size(); ++k) {
      auto const gk = segment(g, static_cast<int>(k));
      if (m_fixed > 0)
        Kokkos::deep_copy(m_space, Kokkos::subview(gk, Kokkos::make_pair(std::size_t(0), m_fixed)), Real(0));
      gaussian_smooth(m_space, gk, m_pb.grid.nz, m_rows / m_pb.grid.nz, m_nx, m_opt.grad_smooth);
      if (m_opt.precondition)
        launch_for(
            "ksweep::fwi::precondition", Kokkos::RangePolicy<ExecSpace>(m_space, 0, n),
            KOKKOS_LAMBDA(std::size_t i) { gk(i) = static_cast<Real>(gk(i) / (isrc(i) + damp)); });
    }
    return loss;
  }

  // The subdomain's images into the whole images (zero elsewhere), then over the subdomains.
  void gather_images() {
    std::size_t const part = static_cast<std::size_t>(m_sub.cells());
    auto put = [&](auto const& from, auto const& to) {
      using V = Kokkos::View<double*, ExecSpace::memory_space, Kokkos::MemoryUnmanaged>;
      launch_for("ksweep::fwi::gather_images", Kokkos::RangePolicy<ExecSpace>(m_space, 0, part),
                 subdomain_copy(V(from.data(), part), V(to.data(), m_n), m_pb.grid, m_sub, true));
    };
    for (int p = 0; p < n_params; ++p) put(m_img_part.gradient(p), m_img.gradient(p));
    put(m_img_part.illum_src, m_img.illum_src);
    put(m_img_part.illum_rec, m_img.illum_rec);
    bitwise_or(m_space, m_dec.domain, m_img.grads);
    bitwise_or(m_space, m_dec.domain, m_img.illum_src);
    bitwise_or(m_space, m_dec.domain, m_img.illum_rec);
  }

  Problem m_pb;
  Options m_opt;
  bool m_illum = true;              // set_illuminations
  comm::Communicator const m_comm;  // a copy: the caller's may be a temporary
  ExecSpace m_space;                // every launch and copy of the inversion is on this instance
  int m_rows = 0, m_nx = 0, m_shots = 0, m_nr = 0, m_cap = 0, m_iteration = 0;
  std::size_t m_n = 0, m_plane = 0, m_fixed = 0;
  double m_scale = 1;
  vec m_model, m_grad;                      // the inverted parameters stacked, and their gradient
  vec m_held[n_params], m_truth[n_params];  // per parameter: held values, true values
  std::vector<int> m_inverted;              // the parameters in m_model, in order
  Box m_box;                                // the optimizer's bounds and fixed cells
  std::unique_ptr<Optimizer<Real, ExecSpace>> m_optimizer;
  std::unique_ptr<P> m_prop;
  std::unique_ptr<E> m_engine;
  typename E::images_type m_img;
  typename P::wavelet_view m_w;
  std::mt19937_64 m_rng;
  Kokkos::View<double*, ExecSpace::memory_space> m_row_sums;
  core::MemoryReport m_memory;
  // A split model (Options::domains): the communicators, this rank's subdomain, its halo
  // exchange, its images and its part of the model.
  bool m_split = false;
  int m_groups = 1, m_group = 0;
  Decomposition m_dec;
  core::Subdomain m_sub;
  std::shared_ptr<comm::HaloExchange<Real, ExecSpace>> m_halo;
  typename E::images_type m_img_part;
  vec m_part;
};

}  // namespace impl

template <int Order, int Dim, class Physics>
std::unique_ptr<Inversion::Impl> make_inversion(Problem problem, Options options, comm::Communicator const& comm) {
  return std::make_unique<impl::Run<Order, Dim, Physics>>(std::move(problem), std::move(options), comm);
}

}  // namespace ksweep::fwi
