#pragma once
/// \file modeling.hpp
/// Forward modelling, its adjoint, Born modelling and the gradient of a survey, for callers that hold their own
/// arrays (C++ programs, the Python package): no templates, host arrays in and out. The physics
/// is constant-density acoustics (vp) or variable-density acoustics (vp and rho).
///
/// A Modeling object is built once for a grid, an absorbing layer, a stencil order, a time step,
/// a survey and a number of time samples; it runs the shots in batches of `batch` shots on the
/// default execution space (the device of a CUDA build). Arrays are row-major:
///   velocity   [nz][nx] or [nz][ny][nx] (m/s); density the same (kg/m^3)
///   wavelets   [shot][source][nt]       (the source amplitudes)
///   records    [shot][nt][receiver]     (time-major, as the propagator writes them)
///   images     [nz][nx] or [nz][ny][nx] (double: the gradient and the two illuminations)
/// On a host backend the caller's wavelets and records are used in place (unmanaged views: no
/// copies); on a device they travel once per batch, unless the caller's arrays are on the device
/// too (set_arrays(Arrays::device): a CUDA tensor's memory, say), which are then used in place.
/// Wavefields leave the device only where a caller asks for a forward run's final state
/// (ForwardState).
///
/// The gradient is with respect to the model cells, with the absorbing layer's velocity (and
/// density) and damping held fixed: they come from the `layer` model given to set_model (the
/// model itself when none is given). Passing a fixed `layer` makes the records a smooth function of
/// the model whose derivative is exactly what gradient() and vjp() return.
///
/// After each batch the object calls `after_batch` (when set) with the shots done and the shots
/// in all: a caller reports progress there, or stops the run (Ctrl-C) by throwing from it; the
/// object is then ready for the next call.
///
/// With `ranks` of more than one rank, the shots are shared over them: the ranks form shot groups
/// (one rank each, or, with `domains` split, domains.count() ranks of one subdomain each, as the
/// inversion's Options::domains; constant density only), each group models its slice of the
/// shots, and every rank gets every shot's records and the images summed over all shots, the
/// same bits as one rank (the images are added shot by shot in shot order along the ranks:
/// comm::Communicator::sum_in_rank_order). forward(), adjoint(), gradient(), vjp() and born() are
/// then collective over `ranks` (the adjoint's source samples of each subdomain put together as
/// the records are); an
/// exception from `after_batch` is raised after what every rank takes part in.
///
/// Synchronisation: every member fences the execution space before it returns.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/fwi/physics.hpp>
#include <ksweep/storage/step_store.hpp>

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ksweep::fwi {

/// Where a caller's arrays live (Modeling::set_arrays): host memory, or the memory of the
/// default execution space (the device of a CUDA build; host memory on host backends).
enum class Arrays { host, device };

/// What is modelled.
struct ModelingSetup {
  core::ModelGrid grid;
  core::PmlConfig pml;
  int order = 4;        ///< spatial order of the stencil (2, 4, 6, 8)
  double dt = 0;        ///< time step (s)
  int nt = 0;           ///< time samples of wavelets and records
  core::Survey survey;  ///< every shot: the same numbers of sources and receivers per shot
  int batch = 0;        ///< shots per pass (0: every shot at once)
  core::Schedule schedule = core::Schedule::automatic;
  storage::StorageConfig storage;  ///< the gradient's saved steps
  Physics physics = Physics::acoustic;
  core::DomainSplit domains;                ///< the model split over `ranks` (default: whole)
  std::optional<comm::Communicator> ranks;  ///< the ranks sharing the shots (required with `domains`)
};

/// The images of a gradient, [nz][nx] or [nz][ny][nx], summed over the shots in order. The
/// illuminations are summed only when one of them is asked for (non-null): a gradient alone
/// moves a third fewer bytes in its imaging.
struct ModelingImages {
  /// The gradient per parameter of the physics (physics_parameters(): dL/dv in s/m, then for
  /// acoustic_vd dL/drho in m^3/kg, per unit of the loss); fewer entries, or nulls: not wanted.
  std::vector<double*> grad;
  double* illum_src = nullptr;  ///< sum over time of the source wavefield squared
  /// sum over time of the adjoint wavefield squared, or after Modeling::set_cross_correlation(true)
  /// the zero-lag cross-correlation of the source and adjoint wavefields, sum_n u^n lambda^{n+1}
  double* illum_rec = nullptr;
};

/// Where forward() starts and what it hands back besides the records: for every shot, the
/// wavefields u^n and u^{n-1} on the padded grid (the model and its absorbing layer, the
/// extents of Modeling::padded_shape()), [shot][NZ][NX] or [shot][NZ][NY][NX], and the absorbing
/// layer's memories (Modeling::memory_values() per shot, in the propagator's own order: a later
/// run takes back what a run wrote). A null start is zero (rest); a null end is not written.
/// Running nt1 samples and then nt2 more from the first run's end gives the bits of one run of
/// nt1 + nt2 samples.
template <class Real>
struct ForwardState {
  Real const* start_now = nullptr;     ///< u^0
  Real const* start_before = nullptr;  ///< u^{-1}
  Real const* start_memory = nullptr;  ///< the layer's memories at the start
  Real* end_now = nullptr;             ///< u^{nt}
  Real* end_before = nullptr;          ///< u^{nt-1}
  Real* end_memory = nullptr;          ///< the layer's memories at the end
};

/// The gradient of a loss with respect to where a forward run ends (ForwardState's end fields),
/// for a loss that reads the end state besides the records: dL/du^{nt}, dL/du^{nt-1} and
/// dL/d(the layer memories at the end), laid out as ForwardState's; a null is zero. vjp() and
/// adjoint() start their reverse sweeps from it. The memories' slots that hold no state (an end
/// state's are zero there) take no gradient.
template <class Real>
struct EndGradient {
  Real const* now = nullptr;     ///< dL/du^{nt}
  Real const* before = nullptr;  ///< dL/du^{nt-1}
  Real const* memory = nullptr;  ///< dL/d(the layer memories)
  bool empty() const { return !now && !before && !memory; }
};

/// What vjp() takes and gives beyond the records' gradient and the model's images, all from its
/// one reverse sweep (each part optional: nulls are not wanted, or zero):
/// - `end`: the gradient with respect to the run's end state, where the sweep starts;
/// - `wavelet_grad` [shot][source][nt]: the wavelets' gradient (the bits adjoint(residual,
///   wavelet_grad, end) gives, without its pass);
/// - `start_now`, `start_before`, `start_memory`: the gradient with respect to the start state
///   (ForwardState's start fields, laid out as those): dL/du^0 = lambda^0, dL/du^{-1} =
///   -lambda^1 and the adjoint memories, as the sweep leaves them.
template <class Real>
struct VjpExtras {
  EndGradient<Real> end;
  Real* wavelet_grad = nullptr;
  Real* start_now = nullptr;
  Real* start_before = nullptr;
  Real* start_memory = nullptr;
  bool start_gradient() const { return start_now || start_before || start_memory; }
};

/// What a reverse watch (Modeling::set_reverse_watch) is handed at reverse step n of a batch of
/// gradient() or vjp(): the adjoint wavefield lambda^n = dL/du^n is complete and the images hold
/// the steps nt - 1 down to n. Its functions are valid during the call only.
template <class Real>
struct ReverseView {
  int step = 0;        ///< n, from nt - 1 down to 0
  int first_shot = 0;  ///< the batch: shots first_shot, ..., first_shot + shots - 1
  int shots = 0;
  /// lambda^n (`now`) and lambda^{n+1} (`next`) of the batch's shots into arrays laid out as
  /// ForwardState's wavefields (padded_shape() per shot); each may be null.
  std::function<void(Real* now, Real* next)> get;
  /// Sets them (each may be null: kept); the sweep goes on from them.
  std::function<void(Real const* now, Real const* next)> set;
  /// The adjoint layer memories of the batch's shots into an array laid out as ForwardState's
  /// memories (memory_values() per shot). At step 0, with get(): the gradient with respect to the
  /// start state of vjp(..., start): dL/du^0 = lambda^0, dL/du^{-1} = -lambda^1, the memories'
  /// as they are.
  std::function<void(Real* memory)> memory;
  /// Sets the adjoint layer memories (laid out as memory()'s; the slots that hold no memory are
  /// kept zero); the sweep goes on from them.
  std::function<void(Real const* memory)> set_memory;
  /// The batch's images of the steps so far into `out` (zeroed first), finished as gradient()
  /// finishes them: at step 0 the bits gradient() gives for a run of this one batch. The
  /// illuminations are zero unless the gradient() or vjp() call asked for one.
  std::function<void(ModelingImages const& out)> images;
};

/// Forward, adjoint and gradient of one survey in precision `Real` (float or double).
template <class Real>
class Modeling {
 public:
  /// Checks the set-up (errors name the value and its limit) and allocates for one batch.
  explicit Modeling(ModelingSetup setup);
  ~Modeling();
  Modeling(Modeling const&) = delete;
  Modeling& operator=(Modeling const&) = delete;

  ModelingSetup const& setup() const;
  /// Cells of the model (nz nx, or nz ny nx).
  long long cells() const;

  /// The model: one array per parameter of the physics (physics_parameters(): the velocity in
  /// m/s, then for acoustic_vd the density in kg/m^3), each [nz][nx] ([nz][ny][nx]). `layer`
  /// (one array per parameter, or none: the model's) sets the absorbing layer's parameters and
  /// damping, which the gradient holds fixed.
  void set_model(std::vector<Real const*> const& fields, std::vector<Real const*> const& layer = {});
  /// Constant density: set_model({vp}) (with {layer} when one is given).
  void set_velocity(Real const* vp, Real const* layer = nullptr);

  /// Records [shot][nt][receiver] of wavelets [shot][source][nt].
  void forward(Real const* wavelets, Real* records);
  /// forward() from the state `state` gives, handing back the state where it ends (see
  /// ForwardState; on ranks, every rank gets every shot's; not on a model split into domains).
  void forward(Real const* wavelets, Real* records, ForwardState<Real> const& state);
  /// The padded grid of ForwardState's wavefields: {NZ, NY, NX} (NY 1 in 2D).
  std::array<int, 3> padded_shape() const;
  /// Values of one shot's layer memories in ForwardState, and their parts: for each axis
  /// (z, (y,) x), psi and then zeta, memory_values(axis) values each.
  long long memory_values() const;
  long long memory_values(int axis) const;
  /// The transpose of forward(): wavelet_grad [shot][source][nt] of records [shot][nt][receiver].
  void adjoint(Real const* records, Real* wavelet_grad);
  /// adjoint() of the records and the end state (the transpose of forward() with a ForwardState
  /// from rest onto both): the wavelets' gradient of a loss with the gradients `records` and `end`
  /// (not on a model split into domains).
  void adjoint(Real const* records, Real* wavelet_grad, EndGradient<Real> const& end);
  /// Loss scale * sum (synthetic - observed)^2 over every shot; the images of its gradient are
  /// written to `out` (each may be null), the synthetic records to `synthetic` (may be null) and
  /// the shots' losses, in order, to `shot_losses` (may be null). Returns the loss (the shots'
  /// losses added in order).
  double gradient(Real const* wavelets, Real const* observed, double scale, ModelingImages const& out,
                  Real* synthetic = nullptr, double* shot_losses = nullptr);
  /// The vector-Jacobian product: the images for dL/d(records) = `residual` [shot][nt][receiver]
  /// (a forward pass that saves the boundary, then the adjoint pass with imaging).
  void vjp(Real const* wavelets, Real const* residual, ModelingImages const& out);
  /// vjp() of the run forward() makes from `start`'s start fields (its end fields are not
  /// read; nulls: rest): the images of the same discrete adjoint, the start held fixed; `more`
  /// (VjpExtras): a loss of the end state too, and the wavelets' and the start's gradients from
  /// the same sweep (with a start, or an end, not on a model split into domains).
  void vjp(Real const* wavelets, Real const* residual, ModelingImages const& out, ForwardState<Real> const& start,
           VjpExtras<Real> const& more = {});

  /// Born (linearised) modelling: the records [shot][nt][receiver] of the wavefield scattered by
  /// the velocity perturbation `scatter` (m/s, the model's shape) around the model set, for
  /// wavelets [shot][source][nt]: the derivative of forward()'s records in the direction
  /// `scatter`, exactly (its transpose is vjp()'s velocity image; the layer as for the gradient,
  /// the density held fixed). Each time step costs about two of forward()'s.
  void born(Real const* wavelets, Real const* scatter, Real* records);

  /// What gradient() and vjp() write to ModelingImages::illum_rec: the receiver illumination
  /// (false, the default) or the zero-lag cross-correlation of the source wavefield u^n and the
  /// adjoint wavefield lambda^{n+1} (true), RTM's plain cross-correlation image condition.
  void set_cross_correlation(bool on);

  /// Called at the reverse steps `steps` of gradient() and vjp() (empty: every step; n = nt - 1
  /// down to 0, batch by batch) with a ReverseView; empty `watch`: none. For one rank's whole
  /// model (not with `ranks` or `domains`). The `shots` schedule ends a chunk of steps at each
  /// watched step (the same bits).
  void set_reverse_watch(std::function<void(ReverseView<Real> const&)> watch, std::vector<int> steps = {});

  /// Called after each batch with (shots done, shots); a throw stops the run there.
  void set_after_batch(std::function<void(int, int)> f);

  /// Where the arrays of the calls that follow live (Arrays::host, the default, or
  /// Arrays::device: pointers into the default execution space's memory, such as a CUDA
  /// tensor's data on a CUDA build; on host backends the same as host arrays). Device arrays are
  /// used in place, with no copy through the host, and their values are checked on the device.
  /// They serve set_model() (the models of a physics built on the host, variable density, are
  /// copied to the host), forward() and adjoint() with or without states, gradient() (its
  /// shot_losses stay a host array), vjp() with its start and extras, and born(), on one rank's
  /// whole model. A state's arrays (ForwardState, EndGradient, VjpExtras' start gradient) go
  /// through host copies on a device backend (the propagator moves states through host memory);
  /// the wavelets, records and images do not. ReverseView's arrays stay host arrays.
  void set_arrays(Arrays where);
  Arrays arrays() const;

  struct Impl;

 private:
  // Every start value of `state` finite (errors name `who`, the shot and the padded cell).
  void check_start(ForwardState<Real> const& state, char const* who) const;
  // The same of an end state's gradient, on a whole model.
  void check_end(EndGradient<Real> const& end, char const* who) const;
  std::unique_ptr<Impl> m_impl;
};

extern template class Modeling<float>;
extern template class Modeling<double>;

}  // namespace ksweep::fwi
