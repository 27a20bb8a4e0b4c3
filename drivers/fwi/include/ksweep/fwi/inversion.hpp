#pragma once
/// \file inversion.hpp
/// Full-waveform inversion as a library: ksweep::fwi::Inversion runs the iterations of an
/// inversion of a physics' parameters (constant density: vp; variable density: vp and rho,
/// either or both inverted; models, bounds, images and errors are per parameter) on the default
/// execution space, over the ranks of a communicator.
///
/// One iteration (step()): the batch of shots is drawn on rank 0 and broadcast (Adam; L-BFGS
/// takes every shot), each rank (each shot group of Options::domains ranks when the model is
/// split) models its contiguous slice of the batch and computes its
/// gradient by boundary saving, the images and losses are summed over the ranks in batch order
/// (so the model is the same bits on any number of ranks), the gradient is conditioned (water
/// rows fixed, Gaussian smoothing, illumination preconditioning), and the optimizer updates the
/// model within its bounds; every rank takes the same step. Everything model-sized lives on
/// the device; the host sees only losses, reductions and what it asks for.
///
/// The caller drives the loop and owns what is written: progress, checkpoints (state() and
/// restore() are the whole state) and figures (model(), images()). A non-finite loss, gradient,
/// optimizer state or model throws IterationError on every rank together, before anything of
/// the iteration is visible.
///
/// Synchronisation: the constructor, step(), restore() and every accessor returning host data
/// fence the inversion's execution space instance before they return.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/memory_report.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/fwi/lbfgs.hpp>
#include <ksweep/fwi/optimizer.hpp>
#include <ksweep/fwi/physics.hpp>
#include <ksweep/storage/step_store.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ksweep::fwi {

/// Per-cell values of each parameter of a physics, [parameter][cell] in physics_parameters()
/// order (vp first); each field laid out [nz][nx] or [nz][ny][nx].
using Fields = std::vector<std::vector<float>>;

/// What is inverted: the grid, the acquisition, the data and the models.
struct Problem {
  core::ModelGrid grid;
  core::PmlConfig pml;
  int order = 4;                ///< spatial order of the stencil (2, 4, 6, 8)
  double dt = 0;                ///< time step (s)
  int nt = 0;                   ///< time samples
  core::Survey survey;          ///< every shot (one source each)
  std::vector<double> wavelet;  ///< nt samples, every shot's source
  std::vector<float> observed;  ///< [shot][nt][receiver], on every rank
  Physics physics = Physics::acoustic;
  /// The starting model, one field per parameter of the physics: {vp} (m/s) or {vp, rho}
  /// (kg/m^3). A parameter not inverted is held at its start.
  Fields start;
  /// The true model for the RMSE, per parameter: fewer fields than parameters, or an empty one,
  /// leave those parameters without an RMSE (reported as NaN).
  Fields truth;
};

enum class Method { adam, lbfgs };

/// The bounds an inversion keeps one parameter within, and Adam's step for it.
struct Bounds {
  double min = 0, max = 0;  ///< in the parameter's units (> 0)
  double lr = 0;            ///< Adam's step (the parameter's units; 0: Options::adam.lr)
};

/// How it is inverted.
struct Options {
  Method method = Method::adam;
  int batch = 1;              ///< shots per gradient (Adam); L-BFGS takes every shot
  std::uint64_t seed = 0;     ///< the batch draw's generator
  bool loss_sum = false;      ///< loss as the plain sum of squares (else divided by batch nt nr)
  int water_rows = 0;         ///< top rows never updated (their gradient is zeroed)
  double grad_smooth = 0;     ///< Gaussian smoothing of the gradient (cells; 0: none)
  bool precondition = false;  ///< divide the gradient by the source illumination (+ 1e-3 of its maximum)
  /// Per parameter of the physics (physics_parameters() order; a missing entry is all 0): the
  /// velocity's are always checked, and its max (vmax) is the fastest velocity the time step
  /// must propagate stably (0 for constant density: the stability limit itself); another
  /// parameter's are checked when it is inverted.
  std::vector<Bounds> bounds;
  AdamParameters adam;             ///< lr, betas, eps (its bounds are `bounds`)
  LbfgsParameters lbfgs;           ///< memory, Wolfe constants, evaluations (its bounds are `bounds`)
  storage::StorageConfig storage;  ///< where and how the saved steps live
  core::Schedule schedule = core::Schedule::automatic;
  /// The model split into domains (core/domain.hpp; constant density): the communicator's ranks
  /// form shot groups of domains.count() ranks, one subdomain each; the images are summed over
  /// the groups in batch order and gathered whole on every rank, where the optimizer runs on
  /// the whole model (the same bits for any split).
  core::DomainSplit domains;
  /// The parameters inverted, a non-empty subset of the physics' (parameter_names()) without
  /// repeats; the others are held fixed. The optimizer's vector stacks them in this order.
  std::vector<std::string> invert{"vp"};
  std::string fault;  ///< test aid: "loss:IT", "gradient:IT" or "model:IT" makes it non-finite
};

/// The whole state between iterations: a checkpoint holds exactly this.
struct State {
  int iteration = 0;  ///< iterations done
  std::string rng;    ///< the batch generator (std::mt19937_64 as written by <<)
  Fields model;       ///< the current model, every parameter of the physics
  /// Adam's moments m and v (empty for L-BFGS), [parameter][cell] over Options::invert.
  std::vector<float> first, second;
  /// Adam's steps since the optimizer (re)started (restart_optimizer(), a stage of frequency
  /// continuation), which its bias correction counts; -1 in a state given to restore(): `iteration`.
  int optimizer_steps = -1;
  /// L-BFGS's correction pairs, gradient and loss at the current model and counters (empty for
  /// Adam); a state without them starts L-BFGS with an empty memory.
  LbfgsState<float> lbfgs;
};

/// What one iteration did.
struct Report {
  int iteration = 0;         ///< 1-based
  double loss = 0;           ///< the batch's loss (L-BFGS: at the accepted model)
  double loss_start = 0;     ///< the batch's loss at the model the iteration started from (Adam: `loss`)
  std::vector<double> rmse;  ///< per parameter, against Problem::truth (NaN without it)
  double seconds = 0;
  std::vector<int> shots;  ///< the batch, in order
  int evaluations = 1;     ///< gradient evaluations of the iteration
};

/// The images of the last gradient evaluation, [nz][nx] or [nz][ny][nx], summed over the batch
/// (before conditioning).
struct Images {
  Fields grad;  ///< the gradient with respect to every parameter of the physics
  std::vector<float> illum_src, illum_rec;
};

/// A non-finite quantity, found by every rank at the same point of an iteration.
class IterationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The checks of the options against the problem that every caller gets before anything is
/// allocated (the constructor runs them; the program runs them before it reads the model):
/// Adam's batch within the survey's shots, water_rows within the grid, grad_smooth within the
/// model's extent, the optimizer's parameters, the bounds (the velocity's max propagating stably with dt), the
/// parameters inverted, and the optimizers' rules (L-BFGS takes the gradient of the loss as it
/// is: no grad_smooth, no precondition). Only the problem's grid, survey, order, dt and physics
/// are read. Messages name the options and dt as `names` says.
struct OptionNames {
  std::string
      prefix;  ///< before each option's name: "fwi." for the program's keys, none for the library's and Python's
  std::string dt = "dt";  ///< the time step's name ("time.dt" in the program)
};
void check_options(Problem const& problem, Options const& options, OptionNames const& names = {});

/// A model (the starting one, a checkpoint's; every parameter of the physics) against the
/// bounds the inversion keeps: outside the water rows, the velocity within its bounds and every
/// other parameter inverted within its own; a cell outside would be clipped at the first step.
/// Throws naming `what` ("the starting model"), the values' range and the bounds (the
/// velocity's max > 0).
void check_bounds(Problem const& problem, Options const& options, Fields const& model, std::string const& what,
                  OptionNames const& names = {});

/// The bounds of parameter `p` (all 0 where `options` has none).
inline Bounds bounds_of(Options const& options, int p) {
  return static_cast<std::size_t>(p) < options.bounds.size() ? options.bounds[static_cast<std::size_t>(p)] : Bounds{};
}

/// Device vectors of the model's size the optimizer of `options` holds (Adam: its two moments;
/// L-BFGS: its correction pairs and five vectors): what a memory estimate counts.
std::size_t optimizer_vectors(Options const& options);

class Inversion {
 public:
  /// Checks the problem and allocates everything on the device (collective). The communicator
  /// is copied (it names the ranks; the caller's object need not outlive the inversion).
  Inversion(Problem problem, Options options, comm::Communicator const& comm);
  ~Inversion();
  Inversion(Inversion const&) = delete;
  Inversion& operator=(Inversion const&) = delete;

  /// Continues from `s` (a checkpoint's state); the problem's starting model is replaced.
  void restore(State const& s);
  /// A new stage of the data (frequency continuation): the wavelet (nt samples) and the observed
  /// data ([shot][nt][receiver], the same on every rank) replace the problem's from the next
  /// iteration on (collective). The optimizer's state is kept: call restart_optimizer() as well
  /// when the stage begins (a run resumed in a stage's middle restores it instead).
  void set_data(std::vector<double> wavelet, std::vector<float> observed);
  /// The optimizer starts afresh: Adam's moments zero and its step count 0, L-BFGS's memory
  /// empty (the loss it remembers is of other data once set_data() changed them).
  void restart_optimizer();
  /// One iteration (collective). Throws IterationError on non-finite numbers.
  Report step();
  /// Iterations done.
  int iteration() const;
  /// The state after the last iteration (host copies).
  State state() const;
  /// The current model, every parameter (host copies).
  Fields model() const;
  /// The images of the last iteration (host copies).
  Images images() const;
  /// Whether the next iterations' gradients sum the illuminations that images() returns (true,
  /// the default). Off, images() holds zero illuminations, each gradient's imaging moves a third
  /// fewer bytes and the ranks sum one image instead of three; the model is the same bits.
  /// Options::precondition sums them whatever this says.
  void set_illuminations(bool on);
  /// RMSE of the current model against the truth, per parameter (NaN without one), summed in a
  /// fixed order.
  std::vector<double> rmse() const;
  /// RMSE of `model` (every parameter) against the truth.
  std::vector<double> rmse(Fields const& model) const;
  /// Bytes of the last gradient evaluation.
  core::MemoryReport memory() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ksweep::fwi
