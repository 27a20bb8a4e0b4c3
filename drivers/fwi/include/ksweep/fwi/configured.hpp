#pragma once
/// \file configured.hpp
/// A run as a configuration (io::Config, the program's TOML keys) describes it, in the library's
/// terms: the grid, the absorbing layer, the survey, the wavelet, the inversion's options, the
/// data modelled or read and checked against the survey, the starting models and the wavelet's
/// estimate. The program (`ksweep model`, `ksweep fwi`) and the Python package take them from
/// here, so that a key means the same and is checked alike everywhere.
///
/// Calls that take a `poll` or an `after_batch` call it between units of work (a smoothing
/// pass, a batch of shots): a caller stops the work there by throwing from it (the program on
/// SIGINT / SIGTERM).
///
/// Link ksweep::configured (it brings the I/O library, ksweep::io, beside ksweep::fwi).

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/fwi/imaging.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/memory.hpp>
#include <ksweep/fwi/spectral.hpp>
#include <ksweep/fwi/workflow.hpp>
#include <ksweep/io/checkpoint.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/velocity.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ksweep::fwi {

/// Whether the configuration's physics has a density (parameter "rho", read by model.density).
inline bool has_density(io::Config const& cfg) { return has_parameter(parse_physics(cfg.propagator.physics), "rho"); }

/// Whether the configuration's physics runs on a model split into domains (core::PhysicsRow::splits).
inline bool physics_splits(io::Config const& cfg) { return physics_row(parse_physics(cfg.propagator.physics)).splits; }

// ---- The grid, the layer, the survey and the wavelet -------------------------------------

/// The grid of a model: a volume when the model has ny > 0 (the files' convention for 3D), else a
/// plane.
core::ModelGrid model_grid(io::VelocityModel const& vm);
/// The absorbing layer of [propagator] (pml_width, pml_reflection, pml_freq, pml_velocity,
/// free_surface).
core::PmlConfig make_pml(io::Config const& cfg);
/// The split of parallel.domains of `grid`: [nx_parts] or [ny_parts, nx_parts] ({1, 1}: one
/// domain), its cuts aligned as the storage's codec needs (core::cut_alignment).
core::DomainSplit domain_split(io::Config const& cfg, core::ModelGrid const& grid);
/// Every shot of the config on a model of nz x nx (x ny in 3D, ny > 0): one source per shot,
/// the same receivers for all (a line, or in 3D lines along x at receivers.count_y positions
/// in y). 3D shots are shots.count_y lines of shots.count, y-major.
core::Survey make_survey(io::Config const& cfg, int nz, int nx, int ny = 0);
/// The acquisition of a run on model `shape`: the survey of [survey] file when given (checked
/// against the model's extent), else make_survey's layout.
core::Survey acquisition(io::Config const& cfg, io::VelocityModel const& shape);
/// The shots of an inversion: [survey] file when given; else the trace headers of a SEG-Y
/// fwi.observed; else the [shots] and [receivers] layout.
core::Survey inversion_survey(io::Config const& cfg, io::VelocityModel const& shape);
/// The far corner of a model in metres: ((nz-1) dh, (nx-1) dh, (ny-1) dh).
io::Position model_end(io::VelocityModel const& shape);
/// A survey in cells from a geometry in metres (one source per shot; each shot's receivers, the
/// rest of its slots silent). Positions within 1e-9 of a cell are that cell.
core::Survey survey_of(io::RecordsFile const& geometry, double dh);
/// The geometry of `survey` in metres into `records` (shots, receivers, src_pos, rec_pos, rec_count).
void set_geometry(io::RecordsFile& records, core::Survey const& survey, double dh);
/// The Ricker wavelet of wavelet.freq and wavelet.delay (time.nt samples of time.dt).
std::vector<double> ricker_wavelet(io::Config const& cfg);
/// Whether wavelet.source names a wavelet file.
bool wavelet_from_file(io::Config const& cfg);
/// The source wavelet of wavelet.source: the Ricker wavelet, or a wavelet file's samples on the
/// modelling's time axis; for "estimate", the Ricker wavelet (the estimate's reference).
std::vector<double> make_wavelet(io::Config const& cfg);

/// The warnings a geophysicist expects of a run, each a sentence starting "warning: ": stages out
/// of order; the wavelet under-sampled in space (the grid; for stages of an estimated or a
/// file's wavelet, the highest stage) or in time (its peak frequency against the Nyquist
/// frequency of time.dt); a survey file that replaces a [shots] / [receivers] layout also given;
/// receivers repeated within a shot; more shots than distinct source cells.
std::vector<std::string> acquisition_warnings(io::Config const& cfg, io::VelocityModel const& vm,
                                              core::Survey const& survey);
/// "warning: `what` the [shots] and [receivers] layout (not used: KEYS)" when the configuration
/// gives such keys, else empty.
std::string unused_layout(io::Config const& cfg, std::string const& what);

// ---- The inversion's options and bounds --------------------------------------------------

/// The largest velocity time.dt propagates stably on a grid of spacing `dh`.
double stable_velocity(io::Config const& cfg, double dh, int dim);
/// The upper bound the inversion keeps velocities under: fwi.vmax, or the stability limit of
/// time.dt when fwi.vmax = 0 (for either physics).
double velocity_bound(io::Config const& cfg, double dh, int dim);
/// The library's options from the configuration's [fwi], [storage], [propagator] and
/// [parallel] keys, with `water_rows` rows kept (fwi.water_rows, or the rows the program
/// detected in the model). One mapping for the program and the Python package.
Options inversion_options(io::Config const& cfg, core::ModelGrid const& grid, int water_rows);

/// The stages of fwi.stages (frequency continuation) with `wavelet` (the run's, the whole band)
/// low-passed for each.
Stages make_stages(io::Config const& cfg, std::vector<double> const& wavelet);
/// A stage's low-pass spreads the wavelet before t = 0, where no source acts: the filtered data
/// keep what the filtered wavelet loses. A warning ("warning: ...") for each stage that loses
/// more than 1 % of its energy so.
std::vector<std::string> stage_warnings(Stages const& stages);

// ---- Memory --------------------------------------------------------------------------

/// Memory of one rank of `ksweep fwi` on `ranks` ranks (fwi::estimate_inversion) on the
/// model `vm` (2D or 3D; its size is what counts).
/// With a split model (`split`), the propagation's part is that of the largest subdomain and
/// the optimizer's (models, moments, summed images) the whole model's.
MemoryEstimate estimate_fwi(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers, int ranks,
                            core::DomainSplit const& split = {});
/// Memory of the forward modelling of every shot (`ksweep model`, and the observed and final
/// data of `ksweep fwi`: on rank 0, or with a split model (`split`) on the largest subdomain).
MemoryEstimate estimate_model(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                              bool fp64, int batch, core::DomainSplit const& split = {});

/// Memory of one rank of `ksweep rtm` on `ranks` ranks (fwi::estimate_imaging, with the
/// [imaging], [storage] and [propagator] keys).
MemoryEstimate estimate_rtm(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers, int ranks,
                            core::DomainSplit const& split = {});

/// What this machine offers the run (fwi::machine_memory; the disk of storage.disk_dir when
/// storage.location = "disk").
MachineMemory machine_memory(io::Config const& cfg);

/// What an inversion allocated (Inversion::memory()) as summary.json records it: the storage's
/// strategy, location and dtype, and the bytes of each part and the device's peak.
nlohmann::json to_json(core::MemoryReport const& memory);

/// For a run that does not fit (check_memory threw): the smallest split of the model (fewest
/// subdomains beyond `tried`, parallel.domains) whose inversion phase fits each rank with one
/// shot group (the batch over its ranks), as a line for the error message.
std::string smallest_split(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                           MachineMemory const& mm, core::DomainSplit const& tried);

// ---- Data: modelled, read, checked -------------------------------------------------------

/// Called after each batch of shots with (shots done, shots); a throw stops the modelling.
using AfterBatch = std::function<void(int, int)>;

/// The records of every shot of `survey` on the model `vm` with the source `wavelet`, in
/// propagator.precision; `density` (variable density) replaces model.density's. With `ranks`
/// and parallel.domains the modelling is split (collective over `ranks`: each shot group models
/// its shots on its subdomains) and every rank gets every shot's records. The records carry the
/// survey's geometry and, for a Ricker source, its frequency and delay.
io::RecordsFile model_data(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                           std::vector<double> const& wavelet, std::vector<float> const* density = nullptr,
                           comm::Communicator const* ranks = nullptr, AfterBatch const& after_batch = {});

/// fwi.observed: ksweep's HDF5 records, or SEG-Y shot gathers (.sgy, .segy) on the model's grid,
/// resampled (band-limited, io/resample.hpp) to time.dt and time.nt when theirs differ (said on
/// stdout; a record shorter than the modelling is warned of on stderr). `values` false reads the
/// header and geometry only (the shape the resampled data will have). `own_axis` receives the
/// file's own dt and nt.
io::RecordsFile read_observed(std::string const& path, io::VelocityModel const& vm, io::Config const& cfg, bool values,
                              std::pair<double, int>* own_axis = nullptr);
/// Checks that observed data `r` (from `path`) match the configuration's acquisition: shape,
/// time axis, grid, the Ricker wavelet they were modelled with, and every source and receiver
/// position (to the millimetre).
void check_observed(io::RecordsFile const& r, io::Config const& cfg, core::Survey const& s, io::VelocityModel const& vm,
                    std::string const& path);
/// Records that are zero everywhere (or subnormal: below the smallest normal float) carry no
/// information: the loss would be the synthetic data's energy and an inversion would fit
/// silence; records with a sample that is not finite (a wave that overflowed float32) cannot be
/// inverted or written. Returns the message naming `what` and the likely causes, empty when `d`
/// holds a finite signal.
std::string silent_data(std::vector<float> const& d, std::string const& what, io::Config const& cfg);

// ---- The starting models and the wavelet's estimate --------------------------------------

/// Depth rows at the top of the model equal to the first cell (the water layer); a row is a
/// plane of ny nx cells in 3D. 0 when the whole model is that value.
int detect_water_rows(io::VelocityModel const& vm);
/// Starting model: the Gaussian-smoothed slowness (sigma cells) of the true model, `water_rows`
/// rows kept.
std::vector<float> starting_model(io::VelocityModel const& vm, double sigma, int water_rows,
                                  std::function<void()> const& poll = {});
/// The starting density: the true density `rho` smoothed (sigma cells), water rows kept.
std::vector<float> starting_density(io::VelocityModel const& vm, std::vector<float> const& rho, double sigma,
                                    int water_rows, std::function<void()> const& poll = {});
/// The true model and the starting velocities `v0` propagate stably with time.dt (every
/// velocity the inversion may reach, up to fwi.vmax, is check_options').
void check_stability(io::Config const& cfg, io::VelocityModel const& truth, std::vector<float> const& v0);
/// fwi.smooth_sigma against the model's largest extent: a Gaussian wider than it is a constant.
void check_smoothing(io::Config const& cfg, io::VelocityModel const& shape);

/// wavelet.source = "estimate": the wavelet that best explains the `observed` records
/// [shot][nt][receiver] given the response of the starting model (`start`, and `density` for
/// variable density) to the Ricker reference of wavelet.freq and wavelet.delay
/// (spectral.hpp's estimate_wavelet, stabilised by wavelet.stabilisation). Models every shot
/// (split over `ranks` as model_data).
WaveletEstimate estimate_source(io::Config const& cfg, io::VelocityModel const& start, core::Survey const& survey,
                                std::vector<float> const& observed, std::vector<float> const* density = nullptr,
                                comm::Communicator const* ranks = nullptr, AfterBatch const& after_batch = {});

/// The data of an inverted model (`vm` with the inversion's velocities; `density` for variable
/// density) with the run's `wavelet`, at the observed data's own sampling (`own_axis`: dt and
/// nt; nt 0: time.dt and time.nt), resampled back from time.dt band-limited.
io::RecordsFile final_data(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                           std::vector<double> const& wavelet, std::vector<float> const* density,
                           std::pair<double, int> own_axis, comm::Communicator const* ranks = nullptr,
                           AfterBatch const& after_batch = {});

// ---- Imaging (configured_imaging.cpp) ------------------------------------------------------

/// The modelling of `survey` on `vm`'s grid as the configuration's propagator keys set it up
/// (order, layer, time axis, batch, schedule, physics; storage for the gradient's transpose).
ModelingSetup modeling_setup(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey);

/// What `ksweep rtm` computes: the RTM image and, with imaging.lsrtm_iterations, least-squares RTM.
struct ImagingResult {
  RtmImage rtm;
  LsrtmResult lsrtm;  ///< empty without imaging.lsrtm_iterations
};
/// RTM of `observed` [shot][nt][receiver] (the background's records subtracted) on the background
/// velocity `v0` (`density`: variable density, held fixed), its absorbing layer held at v0, with
/// the [imaging] conditions, in propagator.precision; then imaging.lsrtm_iterations of LSRTM,
/// `after_iteration(i, misfit)` after each (a throw stops the run). The top `water_rows` depth
/// rows (the water, known) are muted in both images. With `ranks`, collective: the shots over
/// them (and the model over parallel.domains), every rank returning the same bits as one rank.
ImagingResult image_data(io::Config const& cfg, io::VelocityModel const& vm, std::vector<float> const& v0,
                         core::Survey const& survey, std::vector<double> const& wavelet,
                         std::vector<float> const& observed, int water_rows,
                         std::vector<float> const* density = nullptr,
                         std::function<void(int, double)> const& after_iteration = {},
                         comm::Communicator const* ranks = nullptr);

// ---- Checkpoints --------------------------------------------------------------------------

/// The inversion's state `st` as a checkpoint of the run of `cfg` (its run identity and history
/// are the caller's): the model and, with variable density, the density; Adam's moments (zeros
/// for L-BFGS) over fwi.invert; L-BFGS's memory, so that a resumed run takes the uninterrupted
/// run's steps.
io::Checkpoint to_checkpoint(io::Config const& cfg, State const& st);
/// The state a checkpoint holds (Adam's step count from the start of its stage:
/// optimizer_steps -1, which Workflow::restore counts).
State from_checkpoint(io::Checkpoint const& ck);
/// A checkpoint (`where`: its path as shown) against the run that continues from it: iterations
/// left to run, the optimizer's memory, the parameters and moments of the physics and of
/// fwi.invert, the bounds the inversion keeps (`setup` and `options`, as check_bounds), the
/// velocities time.dt propagates, and the water rows (options.water_rows) equal to the starting
/// model's `start` (every parameter). Throws naming the checkpoint and what is wrong.
void check_checkpoint(io::Config const& cfg, io::Checkpoint const& ck, std::string const& where, Problem const& setup,
                      Options const& options, Fields const& start);

// ---- An inversion's inputs, checked before its first write ---------------------------------

/// A split model's checks (collective, the same message on every rank): the split itself
/// (core::check_split), and every shot's points against the cuts (an off-grid point whose taps
/// cross a cut is refused here, before anything is allocated, not when its subdomain is built).
void check_split_run(io::Config const& cfg, core::ModelGrid const& grid, core::DomainSplit const& split,
                     core::Survey const& survey, comm::Communicator const& comm);

/// What is asked of a run beside its configuration.
struct RunRequest {
  std::string resume;         ///< the folder of the run to continue (its checkpoint.bin; empty: none)
  std::filesystem::path out;  ///< the output folder (a run continues in place when it is `resume`)
  bool overwrite = false;     ///< the output folder's results may be replaced (not with an in-place resume)
};

/// How check_run_inputs reaches its caller (each may be empty).
struct InputHooks {
  std::function<void(bool in_place)> folder;                   ///< rank 0: the output folder's checks
  std::function<void(std::string const& table)> memory_table;  ///< rank 0: the memory estimate's table
  std::function<void(char const* doing)> stop_point;           ///< between long steps: a throw stops there
  std::function<void(std::vector<std::string> const&)> warn;   ///< rank 0: acquisition_warnings and the like
};

/// What the checks before the first write leave for the run.
struct RunInputs {
  core::Survey survey;
  io::VelocityModel truth;
  Fields start;                           ///< the starting model, every parameter of the physics
  std::vector<float> rho_true;            ///< variable density: the model's density (the true one)
  int water = 0;                          ///< water rows kept
  io::RecordsFile obs;                    ///< observed data read from fwi.observed (rank 0)
  std::pair<double, int> obs_axis{0, 0};  ///< the observed file's own dt and nt (rank 0; 0: modelled)
  std::vector<double> wavelet;            ///< the source (full band): Ricker, a file's, or the estimate
  Stages stages;                          ///< frequency continuation (each stage's wavelet low-passed once)
  WaveletEstimate estimate;               ///< wavelet.source = "estimate": the estimate and its residuals
  nlohmann::json run;                     ///< the run's identity (recorded in checkpoints, checked on resume)
  io::Checkpoint ck;                      ///< resuming: the checkpoint
  bool resuming = false, in_place = false;
};

/// Every check of an inversion's inputs (collective over `comm`: one message, rank 0's, when any
/// rank fails), before the first byte is written and the cheap ones first: the layout (survey,
/// time axis, grid, smoothing, the options: check_options), the wavelet file, the memory (with
/// the smallest split that would fit), the checkpoint's header, the output folder
/// (`hooks.folder`), the observed data's header, the models and the starting models (bounds,
/// stability), the run's identity (every rank the same), the observed data, and the checkpoint
/// itself. `shape` is the model's shape (io::model_shape: no values read yet).
RunInputs check_run_inputs(io::Config const& cfg, RunRequest const& request, InputHooks const& hooks,
                           comm::Communicator const& comm, io::VelocityModel const& shape);

/// The library's problem from the checked inputs: the whole band's wavelet and data (the
/// workflow's stages low-pass them); the observed data move into it.
Problem inversion_problem(io::Config const& cfg, RunInputs& in);

}  // namespace ksweep::fwi
