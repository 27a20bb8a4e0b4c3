#pragma once
/// \file propagator.hpp
/// The batched acoustic propagator (2D and 3D): forward modelling and its exact discrete adjoint.

#include <ksweep/core/acoustic_kernels.hpp>
#include <ksweep/core/cpml.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/halo.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/core/step_graph.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ksweep::core {

/// The gradient of a loss with respect to where a forward run ended (get_forward_state's
/// u^{nt}, u^{nt-1} and layer memories), host arrays in get_forward_state()'s layout for the
/// batch's shots; nulls: zero. A reverse sweep that starts from it (Propagator::adjoint_start)
/// is the adjoint of a run whose loss reads the end state besides the records.
template <class Real>
struct AdjointEnd {
  Real const* now = nullptr;     ///< dL/du^{nt}
  Real const* before = nullptr;  ///< dL/du^{nt-1}
  Real const* memory = nullptr;  ///< dL/d(the layer memories at the end)
  bool empty() const { return !now && !before && !memory; }
};

/// Forward time stepping and its adjoint for batches of up to `max_shots` shots.
///
/// Conventions. Time step n (n = 0..nt-1) computes u^{n+1} from u^n and u^{n-1}
/// (u^0 = u^{-1} = 0) and adds the wavelet sample w[n] of each source to u^{n+1} at its cell
/// (the raw amplitude, no v^2 dt^2 factor); r[n] = u^{n+1} at each receiver. Each step is two
/// launches: the point work (records of the step before, sources of this one) and the stencil.
/// Wavelets are [shot][source][time], records [shot][time][receiver].
/// The absorbing layer surrounds the model grid; its velocity repeats the nearest model edge.
/// `Dim` is the grid's dimension (2: [nz][nx], 3: [nz][ny][nx]); fields are stored as rows of
/// NX + 2R cells (see Rows in acoustic_kernels.hpp), R the reach of the physics' stencil.
/// `Physics` (physics.hpp) is the equation: Acoustic or AcousticVd (set_model: one field per parameter).
///
/// Synchronisation: every launch is on the instance given to the constructor. The whole
/// operations set_velocity(), set_survey(), forward() and adjoint() fence it before they
/// return; the pieces they are made of (forward_reset, forward_step, advance_forward,
/// forward_finish, adjoint_start, adjoint_step, advance_adjoint) only launch.
template <class Real, int Order, class ExecSpace = Kokkos::DefaultExecutionSpace, int Dimension = 2,
          class Physics = Acoustic>
class Propagator {
 public:
  static constexpr int order = Order;
  static constexpr int M = Order / 2;
  using physics_type = Physics;
  using real_type = Real;
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using cell_type = typename Physics::template cell<Real, Order, Dimension>;
  using kernel_type = PhysicsStep<cell_type, memory_space>;
  /// What the physics adds to the set-up beyond c and the cell profiles (physics.hpp).
  using coefficients_type = typename Physics::template coefficients<Real, Order, memory_space, Dimension>;
  /// The fields' halo: the reach of the physics' stencil (M for constant density).
  static constexpr int R = cell_type::R;
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;
  using field4 = Kokkos::View<Real****, Kokkos::LayoutRight, memory_space>;
  using field2 = Kokkos::View<Real**, Kokkos::LayoutRight, memory_space>;
  using field1 = Kokkos::View<Real*, Kokkos::LayoutRight, memory_space>;
  using index2 = Kokkos::View<int**, Kokkos::LayoutRight, memory_space>;
  /// [shot][source][time]
  using wavelet_view = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;
  /// [shot][time][receiver]
  using record_view = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;

  /// The state of one time-stepping direction (forward wavefield or adjoint wavefield).
  static constexpr int Dim = kernel_type::Dim;
  enum class Direction { forward, adjoint };
  struct State {
    field3 u[2];
    field4 psi[Dim][2], zeta[Dim][2];  // per axis (z, (y,) x strips), two levels each
    int cur = 0;                       // u[cur] is the newest level, u[1 - cur] the one before
    int aux = 0;                       // psi[.][aux], zeta[.][aux] are the current layer memories
  };

  Propagator(ExecSpace const& space, ModelGrid const& grid, PmlConfig const& pml, double dt, int max_shots)
      : m_space(space), m_grid(grid), m_pml(pml), m_dt(dt), m_max_shots(max_shots) {
    check_grid(grid, pml, Order, R);
    coefficients_type::check_layer(pml);
    KSWEEP_REQUIRE(grid.dim() == Dim, "ksweep::core::Propagator: a " << grid.dim() << "D model grid given to the "
                                                                     << Dim << "D propagator");
    KSWEEP_REQUIRE(std::isfinite(dt) && dt > 0, "time.dt = " << dt << " must be > 0");
    KSWEEP_REQUIRE(max_shots >= 1, "ksweep::core::Propagator: max_shots = " << max_shots << " must be >= 1");
    m_layout = Layout(grid, pml, Order, R);
    auto const& l = m_layout;
    m_c = field2(Kokkos::view_alloc(m_space, std::string("ksweep::core::c")), l.field_rows(), l.NX + 2 * R);
    allocate_state(m_fwd, "fwd");
  }

  Layout const& layout() const { return m_layout; }
  ModelGrid const& grid() const { return m_grid; }
  PmlConfig const& pml() const { return m_pml; }
  double dt() const { return m_dt; }
  int max_shots() const { return m_max_shots; }
  int n_shots() const { return m_survey.n_shots; }
  Survey const& survey() const { return m_survey; }
  ExecSpace const& space() const { return m_space; }
  double vmax() const { return m_vmax; }
  double vmin() const { return m_vmin; }

  /// The schedule of the next runs (default: automatic; see schedule.hpp).
  void set_schedule(Schedule s) {
    KSWEEP_REQUIRE(s != Schedule::shots || !m_link,
                   "the shots schedule runs each shot's time loop in one launch and "
                   "cannot exchange halos between steps: use batched or cells "
                   "with domains");
    m_schedule = s;
  }

  /// Domain decomposition: the link of this subdomain to its neighbours (see halo.hpp), called
  /// after every step and for the records; set before set_survey(). The grid's cut faces
  /// (PmlConfig::cut) are the ones the link fills.
  void set_halo_link(HaloLink<Real, memory_space> link) {
    KSWEEP_REQUIRE(!link || m_schedule != Schedule::shots,
                   "the shots schedule cannot exchange halos between steps: use batched or cells with domains");
    m_link = std::move(link);
  }
  bool linked() const { return static_cast<bool>(m_link); }
  /// With a link: whether each step runs the cells next to its cut faces first and sends them while its other cells
  /// run, or runs the whole step and then exchanges. The results are the same bits either way.
  /// Default (automatic): on devices, where the inner cells run while the host drives MPI; on
  /// hosts only for splits without a cut along x: their launches block (MPI moves the faces in
  /// the wait either way), and the strips of R cells along a cut in x, run as separate short
  /// rows, cost more than the exchange they hide (see docs/PERFORMANCE.md, "A model split into
  /// domains").
  void set_overlap(bool on) { m_overlap = on ? 1 : 0; }
  bool overlap() const {
    if (m_overlap >= 0) return m_overlap == 1;
    if constexpr (!impl::runs_by_rows<ExecSpace>) return true;
    return !m_pml.cut[PmlConfig::left] && !m_pml.cut[PmlConfig::right];
  }
  /// The velocity (m/s) of the damping profiles the next set_velocity / set_model builds (0: the
  /// model's maximum; a subdomain takes the whole model's, see PmlConfig::profile_velocity).
  void set_profile_velocity(double v) {
    KSWEEP_REQUIRE(std::isfinite(v) && v >= 0, "ksweep::core::Propagator: profile velocity " << v << " m/s");
    m_pml.profile_velocity = v;
  }
  /// Fills the cut faces' halo of a level of the current batch (nothing without a link).
  void exchange(field3 const& u) const {
    if (!m_link) return;
    m_link.begin(u, m_survey.n_shots);
    m_link.finish(u, m_survey.n_shots);
  }
  /// With a link: every subdomain's receivers into `records` [shot][nt][receiver] (the slots
  /// of the receivers held elsewhere are zeroed here first, then combined bit for bit).
  void gather_records(record_view const& records) const { gather_points(records, m_rec_live, true); }
  /// With a link: every subdomain's sources into a wavelet gradient [shot][source][nt].
  void gather_wavelets(wavelet_view const& w) const { gather_points(w, m_src_live, false); }
  Schedule schedule() const { return m_schedule; }
  /// Whether launches run cell by cell (devices, and the `cells` schedule on hosts).
  bool runs_cells() const { return !impl::runs_by_rows<ExecSpace> || m_schedule == Schedule::cells; }
  /// Whether the current batch runs with the `shots` schedule (never on devices).
  bool runs_shots() const {
    if constexpr (!impl::runs_by_rows<ExecSpace>) {
      return false;
    } else {
      if (m_link) return false;  // whole time loops per shot: no halo exchange between steps
      if (m_schedule == Schedule::automatic) return shots_schedule_pays(m_survey.n_shots, m_space.concurrency());
      return m_schedule == Schedule::shots;
    }
  }

  /// The model velocity on the device, [model row][nx] row-major ([nz][nx], or [nz ny][nx] in 3D).
  using velocity_view = Kokkos::View<Real const**, Kokkos::LayoutRight, memory_space>;

  /// The physics' parameters (physics.hpp, base/physics_table.hpp): vp first, then the others.
  static constexpr int n_parameters = static_cast<int>(Physics::parameters.size());

  /// Sets the model: one host array per parameter of the physics (Physics::parameters, vp
  /// first), row-major [nz][nx] ([nz][ny][nx]), float or double. Each is checked against its
  /// parameter (finite, above its bound; the error names the cell). The layer repeats the
  /// model's edges; with `update_layer` false, the layer keeps its parameters and damping profiles
  /// from the previous call (the gradient is with respect to the model cells with the layer held
  /// fixed). The physics' coefficients build the rest (constant density: c = v^2 dt^2 / dh^2 on
  /// the device, as set_velocity; variable density: AcousticVdCoefficients::set on the host).
  void set_model(std::array<float const*, n_parameters> const& fields, bool update_layer = true) {
    set_host_model(fields, update_layer);
  }
  void set_model(std::array<double const*, n_parameters> const& fields, bool update_layer = true) {
    set_host_model(fields, update_layer);
  }

  /// Constant density: set_model({vp}, update_layer).
  void set_velocity(float const* vp, bool update_layer = true) {
    static_assert(std::is_same_v<Physics, Acoustic>, "set_velocity: constant-density acoustics (else set_model)");
    set_model({vp}, update_layer);
  }

  /// Sets the velocity (m/s) of the model grid from a device view [nz][nx] (the host overload
  /// uploads its values and calls this one), without copying the model to the host. The range
  /// check and the minimum and maximum are reductions and c = v^2 dt^2 / dh^2 (in double, then rounded to Real) is a
  /// kernel, on space(); the damping profiles (1D, from the maximum velocity) are built on the
  /// host when the layer is updated. With `update_layer` false the layer keeps its velocity and
  /// profiles from the previous call (the CFL check covers the new maximum).
  void set_velocity(velocity_view const& vp, bool update_layer = true);

  /// Sets the sources and receivers of the next batch (at most max_shots shots).
  void set_survey(Survey const& survey);

  // ---------------------------------------------------------------------------------------------
  // Point work (sources and receivers)
  // ---------------------------------------------------------------------------------------------

  /// The points of one kind (sources or receivers) of the batch on the device: the field row,
  /// column and weight of each tap, [shot][tap], and which taps of a shot share a cell.
  using PointSet = DevicePoints<Real, memory_space>;
  /// One side of a step's point work: the values of `set`'s points at time index `it` (-1:
  /// none) of `values`, [shot][time][point] when `time_major`, else [shot][point][time], moved
  /// into or out of `field`.
  struct PointFlow {
    field3 field;
    PointSet const* set = nullptr;
    record_view values;
    bool time_major = false;
    int it = -1;
  };

  /// Source injection and receiver sampling of one step, fused into one launch.
  using points_functor = Concat<InjectPoints<Real, memory_space>, SamplePoints<Real, memory_space>>;
  struct PointWork {
    points_functor f;
    int count = 0;  ///< launch range
  };

  /// The point work before forward step n. The records r[n-1] = u^n are final by then; the
  /// sources w[n] go into u^{n-1} with a minus sign, so that the step's "- u^{n-1}" adds them
  /// to u^{n+1}. The two touch different wavefield levels, so they share one launch.
  PointWork forward_points(int n, wavelet_view const& wavelets, record_view const& records) const {
    ksweep::impl::UncountedViews const uncounted;  // the flows' views (launch.hpp)
    State const& st = m_fwd;
    return points({st.u[1 - st.cur], &m_sources, wavelets, false, n < static_cast<int>(wavelets.extent(2)) ? n : -1},
                  {st.u[st.cur], &m_receivers, records, true, n - 1}, false);
  }

  /// The point work before reverse step n. The source samples wavelet_grad[n] = lambda^{n+1}
  /// are final by then; the residual[n-1] goes into lambda^{n+2} with a minus sign, so that the
  /// step's "- lambda^{n+2}" adds it to lambda^n.
  PointWork adjoint_points(int n, record_view const& residual, wavelet_view const& wavelet_grad) const {
    ksweep::impl::UncountedViews const uncounted;  // the flows' views (launch.hpp)
    State const& st = m_adj;
    return points({st.u[1 - st.cur], &m_receivers, residual, true, n - 1},
                  {st.u[st.cur], &m_sources, wavelet_grad, false, n}, true);
  }

  // ---------------------------------------------------------------------------------------------
  // Forward
  // ---------------------------------------------------------------------------------------------

  /// Zeroes the forward wavefields and layer memories (u^0 = u^{-1} = 0).
  void forward_reset() { reset_state(m_fwd); }

  /// Forward step n: records r[n-1] (n >= 1) and sources w[n] (one launch), then u^{n+1} (one
  /// launch). After the last step, forward_finish() records r[nt-1]. Either view may be empty.
  void forward_step(int n, wavelet_view const& wavelets, record_view const& records) {
    auto const w = forward_points(n, wavelets, records);
    launch_points(m_space, "ksweep::core::forward_points", w.f, w.count);
    advance_forward();
  }

  /// The forward time step alone: u^{n+1} from u^n, u^{n-1} and the layer memories.
  void advance_forward() { step<ForwardTag>(m_fwd, "ksweep::core::forward_step"); }

  /// Records r[nt-1] = u^{nt} after the last of nt steps (nothing for empty records).
  void forward_finish(record_view const& records) {
    if (records.extent(0) == 0) return;
    State const& st = m_fwd;
    int const nt = static_cast<int>(records.extent(1));
    SamplePoints<Real, memory_space> sample{st.u[st.cur], records, m_receivers, nt - 1, true, {}};
    launch_points(m_space, "ksweep::core::sample_receivers", sample, m_survey.n_shots * sample.count());
  }

  /// Forward modelling of the current batch from rest: records [shot][nt][receiver] for
  /// wavelets [shot][source][nt].
  void forward(wavelet_view const& wavelets, record_view const& records) {
    forward_reset();
    forward_continue(wavelets, records);
  }

  /// forward() from the state the propagator holds (set_forward_state, or where the last
  /// forward run ended) instead of from rest: wavelets[.., n] enter the step from u^n to u^{n+1}
  /// and records[.., n, ..] are u^{n+1}, n counted from that state. Running nt1 steps and then
  /// nt2 more gives the bits of one run of nt1 + nt2 steps.
  void forward_continue(wavelet_view const& wavelets, record_view const& records) {
    check_batch(wavelets, records);
    int const nt = static_cast<int>(wavelets.extent(2));
    if (runs_shots()) {
      run_shot_steps(Direction::forward, "ksweep::core::forward_shots", forward_shot_step(wavelets, records), 0, nt,
                     false);
    } else {
      run_steps([&] {
        for (int n = 0; n < nt; ++n) forward_step(n, wavelets, records);
      });
    }
    forward_finish(records);
    gather_records(records);
    m_space.fence();
  }

  /// Values of one shot's layer memories: for each axis, psi and then zeta, memory_values(a)
  /// each (the layer's strips of that axis, both sides).
  std::size_t memory_values(int axis) const {
    auto const& v = m_fwd.psi[axis][0];
    return v.extent(0) * v.extent(2) * v.extent(3);
  }
  std::size_t memory_values() const {
    std::size_t n = 0;
    for (int a = 0; a < Dim; ++a) n += 2 * memory_values(a);
    return n;
  }

  /// Sets the forward state of the batch's shots from host arrays (each may be null: zero):
  /// u^n (`now`) and u^{n-1} (`before`) on the padded grid, the model and its absorbing layer
  /// without the halo, [shot][NZ][NX] or [shot][NZ][NY][NX], and the layer memories
  /// (memory_values() per shot, as get_forward_state() writes them). With a free surface, its
  /// row (padded row 0) is set to zero, the value the step keeps there. forward_continue() then
  /// steps on from this state.
  void set_forward_state(Real const* now, Real const* before, Real const* memory);

  /// The forward state of the batch's shots where the last forward run ended, into host arrays
  /// (each may be null: not written), in set_forward_state()'s layout: u^{nt} (`now`), u^{nt-1}
  /// (`before`) and the layer memories.
  void get_forward_state(Real* now, Real* before, Real* memory) const;

  /// The adjoint wavefields of the batch's shots during a reverse sweep, lambda^n (`now`, the
  /// newest level; lambda^n = dL/du^n) and lambda^{n+1} (`next`), into host arrays (each may be
  /// null) laid out as get_forward_state()'s: the field holds mu = c lambda, handed out divided by
  /// c; and the adjoint layer memories (`memory`, laid out as get_forward_state()'s). After the
  /// sweep's last step (n = 0) they are the gradient with respect to the start state
  /// (set_forward_state): dL/du^0 = lambda^0, dL/du^{-1} = -lambda^1, and the memories' as they
  /// are (tests/tst_state.cpp checks them against finite differences). set_adjoint_state() sets
  /// the wavefields (each may be null: kept), multiplied by c, and the adjoint memories (null:
  /// kept; the slots that hold no memory zero).
  void get_adjoint_state(Real* now, Real* next, Real* memory = nullptr) const;
  void set_adjoint_state(Real const* now, Real const* next, Real const* memory = nullptr);

  // ---------------------------------------------------------------------------------------------
  // Adjoint
  // ---------------------------------------------------------------------------------------------

  /// Zeroes the adjoint wavefields (lambda^{nt} = lambda^{nt+1} = 0).
  void adjoint_reset() {
    if (m_adj.u[0].extent(0) == 0) allocate_state(m_adj, "adj");
    reset_state(m_adj);
  }

  /// Starts the reverse pass: zero adjoint wavefields, then lambda^{nt} = residual[nt-1] at the
  /// receivers (nothing more for an empty residual), and, for a loss that reads the end state
  /// too (`end`, see AdjointEnd; add_adjoint_end()), its gradient.
  void adjoint_start(record_view const& residual, AdjointEnd<Real> const& end = {}) {
    adjoint_reset();
    State const& st = m_adj;
    if (residual.extent(0) != 0) {
      int const nt = static_cast<int>(residual.extent(1));
      InjectPoints<Real, memory_space> inject{st.u[st.cur], residual, m_receivers, nt - 1,
                                              true,         Real(1),  m_c};  // mu = c lambda
      launch_points(m_space, "ksweep::core::inject_residuals", inject, m_survey.n_shots * inject.count());
      exchange(st.u[st.cur]);
    }
    if (!end.empty()) add_adjoint_end(end);
  }

  /// Adds the gradient with respect to the end state to the reverse sweep's start (after
  /// adjoint_reset, before the first reverse step): the adjoint state pairs (u^{n}, u^{n-1})
  /// with (lambda^n, -lambda^{n+1}) and the layer memories with the adjoint memories (the
  /// mirror of get_adjoint_state()'s start gradient), so lambda^{nt} += dL/du^{nt},
  /// lambda^{nt+1} = -dL/du^{nt-1} and the adjoint memories = dL/d(memories), the slots that
  /// hold no memory zero. Host arrays, once per batch; fences the instance.
  void add_adjoint_end(AdjointEnd<Real> const& end);

  /// Reverse step n (after adjoint_start, n = nt-1 down to 0): wavelet_grad[n] = lambda^{n+1}
  /// and residual[n-1] (one launch), then lambda^n (one launch). Either view may be empty.
  void adjoint_step(int n, record_view const& residual, wavelet_view const& wavelet_grad) {
    auto const w = adjoint_points(n, residual, wavelet_grad);
    launch_points(m_space, "ksweep::core::adjoint_points", w.f, w.count);
    advance_adjoint();
  }

  /// The transposed time step alone: lambda^n from lambda^{n+1}, lambda^{n+2} and the layer
  /// memories.
  void advance_adjoint() { step<AdjointTag>(m_adj, "ksweep::core::adjoint_step"); }

  /// The adjoint of forward(): wavelet_grad [shot][source][nt] from residual [shot][nt][receiver].
  /// With `end`: of the run's records and its end state (AdjointEnd).
  void adjoint(record_view const& residual, wavelet_view const& wavelet_grad, AdjointEnd<Real> const& end = {}) {
    check_batch(wavelet_grad, residual);
    int const nt = static_cast<int>(residual.extent(1));
    adjoint_start(residual, end);
    if (runs_shots()) {
      run_shot_steps(Direction::adjoint, "ksweep::core::adjoint_shots",
                     adjoint_shot_step(residual, wavelet_grad, nt - 1), 0, nt, true);
    } else {
      run_steps([&] {
        for (int n = nt - 1; n >= 0; --n) adjoint_step(n, residual, wavelet_grad);
      });
    }
    gather_wavelets(wavelet_grad);
    m_space.fence();
  }

  // ---------------------------------------------------------------------------------------------
  // Born (linearised) modelling (born.hpp)
  // ---------------------------------------------------------------------------------------------

  /// The scattering scale k = 2 dv / v of a velocity perturbation dv [model row][nx] on the
  /// device, laid out as c() (born.hpp).
  field2 born_scale(velocity_view const& dvp) const;
  /// Born modelling of the batch: the records [shot][time][receiver] of the scattered wavefield
  /// of scale k (born_scale), the derivative of forward()'s records for wavelets
  /// [shot][source][time] in the direction dv. A second forward state, allocated on first use.
  void born(wavelet_view const& wavelets, field2 const& k, record_view const& records);

  // ---------------------------------------------------------------------------------------------
  // The `shots` schedule (host backends)
  // ---------------------------------------------------------------------------------------------

  /// One time step of one shot: the point work and the stencil of a forward (ForwardTag) or
  /// adjoint (AdjointTag) step, with the bodies of the batched launches, in the same order.
  template <class Tag>
  struct ShotStep {
    static constexpr bool is_forward = std::is_same_v<Tag, ForwardTag>;
    kernel_type m_k[2];                      // the kernel after an even / odd number of steps from m_n_base
    InjectPoints<Real, memory_space> m_in;   // forward: sources w[n]; adjoint: residual[n-1]
    SamplePoints<Real, memory_space> m_out;  // forward: records r[n-1]; adjoint: wavelet_grad[n]
    int m_n_in = 0, m_n_out = 0, m_nt_in = 0, m_n_base = 0, m_rows = 0;

    /// The parity of step n from m_n_base: which of the two kernels (and of what callers built
    /// for each, over the levels reverse_levels() names) runs step n.
    int parity(int n) const { return (n - m_n_base) & 1; }
    kernel_type const& at(int n) const { return m_k[parity(n)]; }
    void points(int s, int n) const {
      auto const& k = at(n);
      int const it_in = is_forward ? n : n - 1, it_out = is_forward ? n - 1 : n;
      if (it_out >= 0)
        for (int i = 0; i < m_n_out; ++i) m_out.apply(k.m_cur, s, i, it_out);
      if (it_in >= 0 && it_in < m_nt_in)
        for (int i = 0; i < m_n_in; ++i) m_in.apply(k.m_out, s, i, it_in);
    }
    void stencil(int s, int n) const {
      auto const& k = at(n);
      for (int iz = 0; iz < m_rows; ++iz) k(impl::RowTag<Tag>{}, s * m_rows + iz);
    }
    void operator()(int s, int n) const {
      points(s, n);
      stencil(s, n);
    }
  };

  /// The forward step body of the `shots` schedule for steps counted from n_base (the forward
  /// state as it is now is the state before step n_base).
  ShotStep<ForwardTag> forward_shot_step(wavelet_view const& wavelets, record_view const& records,
                                         int n_base = 0) const {
    return shot_step<ForwardTag>(m_fwd, forward_points(n_base, wavelets, records), n_base);
  }
  /// The adjoint step body of the `shots` schedule for steps counted down from n_base.
  ShotStep<AdjointTag> adjoint_shot_step(record_view const& residual, wavelet_view const& wavelet_grad,
                                         int n_base) const {
    return shot_step<AdjointTag>(m_adj, adjoint_points(n_base, residual, wavelet_grad), n_base);
  }

  /// Runs `body(s, n)` for the steps [n0, n1) (decreasing when `reverse`) of every shot with the
  /// `shots` schedule, then advances the state of `direction` by that many steps.
  template <class Body>
  void run_shot_steps(Direction direction, char const* label, Body const& body, int n0, int n1, bool reverse) {
    if constexpr (impl::runs_by_rows<ExecSpace>) {
      launch_shot_steps(m_space, label, body, m_survey.n_shots, n0, n1, reverse);
      if ((n1 - n0) % 2 != 0) rotate(direction == Direction::forward ? m_fwd : m_adj);
    } else {
      (void)direction, (void)label, (void)body, (void)n0, (void)n1, (void)reverse;
      KSWEEP_REQUIRE(false, "ksweep::core::Propagator: the shots schedule runs on host backends only");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Access for gradient and storage layers
  // ---------------------------------------------------------------------------------------------
  // The time levels belong to the propagator: callers read them, and only the propagator's
  // steps (and step_back_forward) rotate them.
  State const& forward_state() const { return m_fwd; }
  State const& adjoint_state() const { return m_adj; }
  /// The newest forward level (u^{n+1} after forward step n) and the one before it.
  field3 const& forward_newest() const { return m_fwd.u[m_fwd.cur]; }
  field3 const& forward_previous() const { return m_fwd.u[1 - m_fwd.cur]; }
  /// The newest adjoint level (lambda^{n+1} before reverse step n).
  field3 const& adjoint_newest() const { return m_adj.u[m_adj.cur]; }

  /// The forward wavefield went `levels` levels back in time: the time reversal of the gradient
  /// wrote u^{n-1} over the newest level u^{n+1}, so the level before it, u^n, is the newest
  /// now (per level; only the parity of `levels` matters). The layer memories are not reversed.
  void step_back_forward(int levels = 1) {
    if (levels % 2 != 0) m_fwd.cur = 1 - m_fwd.cur;
  }

  /// The reverse cursor: the two forward levels a reverse step reads, `k` steps below the one
  /// the sweep starts from (k = 0: the newest level holds u^{n+1}, the one before u^n). A sweep
  /// that rebuilds (`rebuilding`: u^{n-1} written over the newest level each step, then
  /// step_back_forward) alternates them step by step; one that decodes u^n into the level
  /// before the newest keeps them.
  struct ReverseLevels {
    field3 const& older;  ///< u^n
    field3 const& newer;  ///< u^{n+1}; a rebuilding step writes u^{n-1} over it
  };
  ReverseLevels reverse_levels(int k, bool rebuilding) const {
    if (rebuilding && k % 2 != 0) return {forward_newest(), forward_previous()};
    return {forward_previous(), forward_newest()};
  }
  /// The forward state after the step `k` steps past the next one (k = 0: the next step, 1: the
  /// one after it): what the shot-by-shot schedule's step kernels of either parity leave.
  State forward_state_after(int k) const {
    State st = m_fwd;
    if (k % 2 == 0) st.cur = 1 - st.cur, st.aux = 1 - st.aux;
    return st;
  }
  field2 const& c() const { return m_c; }
  field2 const& vp_model() const { return m_vp_model; }
  /// Whether the absorbing layer's velocity (and density) is the copy of the model's edge cells
  /// that the last set_velocity / set_model made (update_layer), so that a gradient with respect
  /// to the model has the layer's chain rule (GradientEngine::set_layer_chain); false when the
  /// layer kept its values from an earlier call.
  bool layer_copies_model() const { return m_layer_copies_model; }
  /// The physics' own coefficients (variable density: the buoyancy and the model density).
  coefficients_type const& coefficients() const { return m_coef; }
  PointSet const& sources() const { return m_sources; }
  PointSet const& receivers() const { return m_receivers; }

  /// The injection that takes the sources w[it] out of `into` (-w: the forward step added them
  /// through "- u^{n-1}"), for the time reversal of the forward wavefield.
  InjectPoints<Real, memory_space> source_removal(field3 const& into, wavelet_view const& w, int it) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functor (launch.hpp)
    return {into, w, m_removal, it, false, Real(-1), {}};
  }

  /// A kernel functor bound to `st` (cur -> out) with the layer memories in -> out.
  kernel_type bind(State const& st) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the kernel (launch.hpp)
    kernel_type k(m_layout);
    if constexpr (impl::runs_by_rows<ExecSpace>) k.set_block_y(host_block_y());
    k.m_cur = st.u[st.cur];
    k.m_out = st.u[1 - st.cur];
    for (int a = 0; a < Dim; ++a) {
      k.m_psi_in[a] = st.psi[a][st.aux];
      k.m_psi_out[a] = st.psi[a][1 - st.aux];
      k.m_zeta_in[a] = st.zeta[a][st.aux];
      k.m_zeta_out[a] = st.zeta[a][1 - st.aux];
      k.m_a[a] = m_prof_a[a];
      k.m_b[a] = m_prof_b[a];
      k.m_mask[a] = m_prof_mask[a];
    }
    k.m_c = m_c;
    m_coef.bind(k.m_extra);
    return k;
  }

  /// A shot step body from the batched point work of step n_base (the same injection and
  /// sampling functors, used with the body's own time indices) and kernels bound to `st`.
  template <class Tag>
  ShotStep<Tag> shot_step(State const& st, PointWork const& w, int n_base) const {
    ShotStep<Tag> b;
    bind_pair(st, b.m_k);
    b.m_in = w.f.m_first;
    b.m_out = w.f.m_second;
    auto const& in = b.m_in.m_values;
    b.m_n_in = in.extent(0) > 0 ? b.m_in.count() : 0;
    b.m_nt_in = static_cast<int>(b.m_in.m_time_major ? in.extent(1) : in.extent(2));
    b.m_n_out = b.m_out.m_out.extent(0) > 0 ? b.m_out.count() : 0;
    b.m_n_base = n_base;
    b.m_rows = m_layout.rows();
    return b;
  }

  /// Kernels bound to `st` (k[0]) and to `st` one step later (k[1]).
  void bind_pair(State const& st, kernel_type (&k)[2]) const {
    State next = st;
    next.cur = 1 - st.cur;
    next.aux = 1 - st.aux;
    k[0] = bind(st);
    k[1] = bind(next);
  }

  /// 3D on hosts: sets the rows of y per block of the row sweeps (0: automatic, see
  /// host_block_y). The results do not depend on it.
  void set_block_y(int by) { m_block_y = by; }

  /// 3D on hosts: rows of y per block of the row sweeps (see AcousticStep::set_block_y): the
  /// largest block whose 2M + 1 planes of u^n fit in half of 1 MiB (a core's L2 here), at
  /// least 8 rows; the whole plane when it fits.
  int host_block_y() const {
    if (m_block_y > 0) return m_block_y;
    auto const& l = m_layout;
    std::size_t const row = static_cast<std::size_t>(l.NX + 2 * R) * sizeof(Real), budget = std::size_t(1) << 19;
    std::size_t const fit = budget / (row * (2 * R + 1));
    return static_cast<int>(std::max<std::size_t>(8, std::min<std::size_t>(fit > 2 * R ? fit - 2 * R : 8, l.NY)));
  }

  /// Runs `body`, a run of steps of the batched schedule (launches on this instance and the
  /// levels' rotation alone: no halo exchange, no fence, no copy), through the step graphs: on
  /// CUDA with KSWEEP_CUDA_GRAPHS=1 replayed as a CUDA graph (step_graph.hpp), else as it is.
  /// A model split into domains launches as it is (its exchanges are MPI calls).
  template <class Body>
  void run_steps(Body&& body) {
    if (m_link) {
      body();
      return;
    }
    m_graphs->run(m_space, body, [this] {
      std::array<int, 6> const levels = {m_fwd.cur, m_fwd.aux, m_adj.cur, m_adj.aux, m_born.cur, m_born.aux};
      return [this, levels] {
        m_fwd.cur = levels[0], m_fwd.aux = levels[1], m_adj.cur = levels[2], m_adj.aux = levels[3];
        m_born.cur = levels[4], m_born.aux = levels[5];
      };
    });
  }
  /// What run_steps() did so far: runs replayed, graphs captured, runs launched as they are.
  StepGraphCounts graph_counts() const { return m_graphs->counts(); }

  /// Bytes of the working fields of one direction (two wavefield levels and layer memories).
  std::size_t state_bytes() const {
    auto const& st = m_fwd;
    std::size_t b = 0;
    for (int i = 0; i < 2; ++i) {
      b += st.u[i].span() * sizeof(Real);
      for (int a = 0; a < Dim; ++a) b += (st.psi[a][i].span() + st.zeta[a][i].span()) * sizeof(Real);
    }
    return b;
  }

 private:
  template <class Tag>
  void step(State& st, char const* label) {
    auto const& l = m_layout;
    kernel_type const k = bind(st);
    if (!overlaps()) {
      launch_grid<Tag>(m_space, label, k, m_survey.n_shots * l.rows(), l.NX, runs_cells());
      rotate(st);
      exchange(st.u[st.cur]);
      return;
    }
    // The cells within R of a cut face first: they read the halo (filled after the step before)
    // and are what the neighbours' halo takes; their faces travel while the other cells run.
    char const* const edge =
        std::is_same_v<Tag, ForwardTag> ? "ksweep::core::forward_cut_cells" : "ksweep::core::adjoint_cut_cells";
    auto const w = windows();
    for (int i = 0; i < w.n_cut; ++i) launch_window<Tag>(edge, k, w.cut[i]);
    rotate(st);
    m_link.begin(st.u[st.cur], m_survey.n_shots);
    launch_window<Tag>(label, k, w.inner);
    m_link.finish(st.u[st.cur], m_survey.n_shots);
  }

  // Whether steps overlap their halo exchange with the inner cells.
  bool overlaps() const { return m_link && overlap(); }

  // Windows of the padded grid [x0, x1) x [y0, y1): the strips of R cells next to each cut face
  // (y faces whole along x, then x faces between them) and the inner cells.
  struct Window {
    int x0, x1, y0, y1;
  };
  struct Windows {
    Window cut[4];
    int n_cut = 0;
    Window inner;
  };
  Windows windows() const {
    auto const& l = m_layout;
    int const NY = Dim == 3 ? l.NY : 1;
    auto const& c = m_pml.cut;
    bool const lo_x = c[PmlConfig::left], hi_x = c[PmlConfig::right];
    bool const lo_y = Dim == 3 && c[PmlConfig::front], hi_y = Dim == 3 && c[PmlConfig::back];
    Windows w;
    Window& in = w.inner;
    in.x0 = lo_x ? R : 0;
    in.x1 = hi_x ? l.NX - R : l.NX;
    in.y0 = lo_y ? R : 0;
    in.y1 = hi_y ? NY - R : NY;
    auto add = [&w](int x0, int x1, int y0, int y1) {
      Window& strip = w.cut[w.n_cut++];
      strip.x0 = x0, strip.x1 = x1, strip.y0 = y0, strip.y1 = y1;
    };
    if (lo_y) add(0, l.NX, 0, R);
    if (hi_y) add(0, l.NX, NY - R, NY);
    if (lo_x) add(0, R, in.y0, in.y1);
    if (hi_x) add(l.NX - R, l.NX, in.y0, in.y1);
    return w;
  }
  template <class Tag>
  void launch_window(char const* label, kernel_type const& k, Window const& w) const {
    kernel_type const kw = k.window(w.x0, w.x1, w.y0, w.y1);
    launch_grid<Tag>(m_space, label, kw, m_survey.n_shots * kw.window_rows(), kw.window_cols(), runs_cells());
  }

  // [shot][point] 1 where the point is held here (links only).
  template <class Live>
  Kokkos::View<unsigned char**, Kokkos::LayoutRight, memory_space> live_mask(int n, Live const& live,
                                                                             std::string const& what) const {
    int const ns = m_survey.n_shots;
    Kokkos::View<unsigned char**, Kokkos::LayoutRight, memory_space> d(
        Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, "ksweep::core::" + what + "_live"), ns, n);
    auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
    for (int s = 0; s < ns; ++s)
      for (int i = 0; i < n; ++i) h(s, i) = live(s, i) ? 1 : 0;
    Kokkos::deep_copy(m_space, d, h);
    m_space.fence();
    return d;
  }

  // Zeroes the slots of the points held elsewhere ([shot][time][point] when time_major, else
  // [shot][point][time]), then combines the subdomains' values (links only).
  void gather_points(record_view const& v, Kokkos::View<unsigned char**, Kokkos::LayoutRight, memory_space> const& live,
                     bool time_major) const {
    if (!m_link || v.extent(0) == 0) return;
    int const ns = m_survey.n_shots;
    int const n1 = static_cast<int>(v.extent(1)), n2 = static_cast<int>(v.extent(2));
    launch_for("ksweep::core::zero_points_elsewhere",
               Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3, Kokkos::Iterate::Right, Kokkos::Iterate::Right>>(
                   m_space, {0, 0, 0}, {ns, n1, n2}),
               ZeroElsewhere<Real, memory_space>{v, live, time_major});
    m_link.gather_records(v, ns);
  }

  // One step on: the level written becomes the newest, and so do the layer memories written.
  static void rotate(State& st) {
    st.cur = 1 - st.cur;
    st.aux = 1 - st.aux;
  }

  // Injection of in.values[.., in.it, ..] * -1 into in.field and sampling of out.field into
  // out.values[.., out.it, ..]; a negative time index (or an empty view) leaves that part out.
  // The adjoint (`adjoint_field`) carries mu = c lambda: injected values are weighted by c and
  // sampled ones divided by it.
  PointWork points(PointFlow const& in, PointFlow const& out, bool adjoint_field) const {
    ksweep::impl::UncountedViews const uncounted;  // views that outlive the functors (launch.hpp)
    int const ns = m_survey.n_shots;
    PointWork w;
    typename InjectPoints<Real, memory_space>::weight_view const weight = adjoint_field ? m_c : field2();
    w.f.m_first =
        InjectPoints<Real, memory_space>{in.field, in.values, *in.set, in.it, in.time_major, Real(-1), weight};
    w.f.m_second = SamplePoints<Real, memory_space>{out.field, out.values, *out.set, out.it, out.time_major, weight};
    w.f.m_n_first = in.values.extent(0) > 0 && in.it >= 0 ? ns * w.f.m_first.count() : 0;
    w.count = w.f.m_n_first + (out.values.extent(0) > 0 && out.it >= 0 ? ns * w.f.m_second.count() : 0);
    return w;
  }

  // A kind of point on the device: the field row and column of each tap (halo offset included),
  // their weights (none when every weight is 1) and the taps of each shot that share a cell (see
  // PointLinks).
  PointSet to_device(core::PointTaps const& t, int n_per_shot, std::string const& label) const;
  // The buffer of `label` in `kept` when it has these extents, else a new one kept there.
  template <class View>
  View kept_buffer(std::map<std::string, View>& kept, std::string const& label, int n0, int n1) const {
    auto const it = kept.find(label);
    if (it != kept.end() && static_cast<int>(it->second.extent(0)) == n0 &&
        static_cast<int>(it->second.extent(1)) == n1)
      return it->second;
    View v(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, label), n0, n1);
    kept[label] = v;
    return v;
  }

  void check_batch(wavelet_view const& w, record_view const& r) const {
    KSWEEP_REQUIRE(m_survey.n_shots > 0, "ksweep::core::Propagator: no survey set");
    KSWEEP_REQUIRE(
        static_cast<int>(w.extent(0)) == m_survey.n_shots && static_cast<int>(w.extent(1)) == m_survey.n_sources,
        "wavelets are [" << w.extent(0) << "][" << w.extent(1) << "][...], expected [" << m_survey.n_shots << "]["
                         << m_survey.n_sources << "][nt]");
    KSWEEP_REQUIRE(static_cast<int>(r.extent(0)) == m_survey.n_shots && r.extent(1) == w.extent(2) &&
                       static_cast<int>(r.extent(2)) == m_survey.n_receivers,
                   "records are [" << r.extent(0) << "][" << r.extent(1) << "][" << r.extent(2) << "], expected ["
                                   << m_survey.n_shots << "][" << w.extent(2) << "][" << m_survey.n_receivers << "]");
    KSWEEP_REQUIRE(w.extent(2) > 0, "time.nt = " << w.extent(2) << " must be > 0");
  }

  void allocate_state(State& st, char const* which) {
    auto const& l = m_layout;
    int const S = m_max_shots;
    std::string const p = std::string("ksweep::core::") + which;
    // Strips of each axis (see AcousticStep): extents after [side][shot] (sizes.hpp).
    auto const ext = strip_extents(l);
    char const* const axis_name[3] = {"z", Dim == 3 ? "y" : "x", "x"};
    for (int i = 0; i < 2; ++i) {
      std::string const suffix = std::to_string(i);
      st.u[i] = field3(Kokkos::view_alloc(m_space, p + "::u" + suffix), S, l.field_rows(), l.NX + 2 * R);
      for (int a = 0; a < Dim; ++a) {
        std::string const ax = axis_name[a];
        st.psi[a][i] = field4(Kokkos::view_alloc(m_space, p + "::psi" + ax + suffix), 2, S, ext[a][0], ext[a][1]);
        st.zeta[a][i] = field4(Kokkos::view_alloc(m_space, p + "::zeta" + ax + suffix), 2, S, ext[a][0], ext[a][1]);
      }
    }
  }

  void reset_state(State& st) {
    for (int i = 0; i < 2; ++i) {
      Kokkos::deep_copy(m_space, st.u[i], Real(0));
      for (int a = 0; a < Dim; ++a) {
        Kokkos::deep_copy(m_space, st.psi[a][i], Real(0));
        Kokkos::deep_copy(m_space, st.zeta[a][i], Real(0));
      }
    }
    st.cur = 0;
    st.aux = 0;
  }

  // Copies between the padded grid's cells of a host field h [shot][field row][NX + 2R] and an
  // array [shot][NZ][NY][NX], for the batch's shots: into h from `from` (then, with a free
  // surface, zero on the surface row), or from h into `to` (one of them null).
  template <class HostField>
  void padded_copy(HostField const& h, Real const* from, Real* to) const;
  template <class HostField, class HostC>
  static void divide_by_c(HostField const& h, HostC const& c);
  // Writes host arrays, laid out as get_adjoint_state()'s, into the adjoint state: each level
  // (null: kept) times c replaces the field's grid cells (`add` false) or is added to them (`add`
  // true), `next` times next_sign, and the memories (null: kept) replace the adjoint memories.
  // set_adjoint_state() and add_adjoint_end() are its two uses. Fences the instance.
  void put_adjoint_state(Real const* now, Real const* next, Real const* memory, bool add, Real next_sign);

  // Copies between the current layer memories of `st` (psi and zeta of each axis, [side][shot]
  // [..][..]) and an array of memory_values() per shot, for the batch's shots: into the state
  // from `from`, or from the state into `to` (one of them null).
  void memory_copy(State const& st, Real const* from, Real* to) const;

  void build_profiles();
  template <class T>
  void set_host_model(std::array<T const*, n_parameters> const& fields, bool update_layer);

  ExecSpace m_space;
  ModelGrid m_grid;
  PmlConfig m_pml;
  double m_dt;
  int m_max_shots;
  Layout m_layout;
  Survey m_survey;
  double m_vmin = 0, m_vmax = 0;
  field2 m_c, m_vp_model;
  bool m_layer_copies_model = false;                      // see layer_copies_model()
  field1 m_prof_a[Dim], m_prof_b[Dim], m_prof_mask[Dim];  // CPML profiles per axis (z, (y,) x)
  // Variable density: the averaged buoyancy per axis (like c) and the half-point profiles.
  coefficients_type m_coef;
  PointSet m_sources, m_receivers;
  PointSet m_removal;          // the sources' taps in the model (source_removal)
  State m_fwd, m_adj, m_born;  // m_born: Born modelling's scattered field (allocated by born())
  Schedule m_schedule = default_schedule();
  HaloLink<Real, memory_space> m_link;                 // domain decomposition
  mutable std::map<std::string, index2> m_kept_index;  // to_device's buffers, by label
  mutable std::map<std::string, field2> m_kept_real;
  std::shared_ptr<StepGraphs<ExecSpace>> m_graphs = std::make_shared<StepGraphs<ExecSpace>>();  // run_steps()
  Kokkos::View<unsigned char**, Kokkos::LayoutRight, memory_space> m_rec_live, m_src_live;      // [shot][point], links
  int m_block_y = 0;   // 0: automatic (host_block_y)
  int m_overlap = -1;  // see set_overlap (-1: automatic)
};

}  // namespace ksweep::core

#include <ksweep/core/propagator_setup.hpp>
#include <ksweep/core/propagator_state.hpp>
#include <ksweep/core/born.hpp>
