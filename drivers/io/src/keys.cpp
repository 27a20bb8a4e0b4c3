#include <ksweep/io/keys.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/base/physics_table.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <utility>

namespace ksweep::io {
namespace {

/// The field `M` of the section `S` of a Config.
template <auto S, auto M>
auto& at(Config& c) {
  return (c.*S).*M;
}

/// The allowed values of the keys whose names are the configuration's own (the others are the
/// registry's, ksweep/base/names.hpp).
inline constexpr names::Choice unit_choices[] = {{"m/s", "metres per second"},
                                                 {"km/s", "kilometres per second (x 1000, rounded once)"}};
inline constexpr names::Choice precision_choices[] = {{"fp32", "single precision"}, {"fp64", "double precision"}};
/// The physics: the rows of the physics table (ksweep/base/physics_table.hpp), its order.
template <std::size_t... I>
constexpr std::array<names::Choice, sizeof...(I)> physics_choices_of(std::index_sequence<I...>) {
  return {{{core::physics_table[I].name, core::physics_table[I].summary}...}};
}
inline constexpr auto physics_choices = physics_choices_of(std::make_index_sequence<std::size(core::physics_table)>{});
inline constexpr names::Choice loss_choices[] = {{"mean", "the mean of the squared residuals"},
                                                 {"sum", "half their sum"}};
inline constexpr names::Choice parameter_choices[] = {{"vp", "the velocity"}, {"rho", "the density"}};
inline constexpr names::Choice condition_choices[] = {
    {"born",
     "the Born adjoint: the source wavefield's second time difference with the receiver wavefield, "
     "weighted by 2 / v (the velocity gradient's correlation)"},
    {"cross-correlation", "the plain zero-lag cross-correlation of the source and receiver wavefields"}};
inline constexpr names::Option units{"model.units", unit_choices, std::size(unit_choices), true};
inline constexpr names::Option precision{"propagator.precision", precision_choices, std::size(precision_choices), true};
inline constexpr names::Option physics{"propagator.physics", physics_choices.data(), physics_choices.size(), true};
inline constexpr names::Option loss_norm{"fwi.loss_norm", loss_choices, std::size(loss_choices), true};
inline constexpr names::Option parameter{"fwi.invert", parameter_choices, std::size(parameter_choices), true};
inline constexpr names::Option condition{"imaging.condition", condition_choices, std::size(condition_choices), true};

/// A key under construction: `KEY(fwi, lr).says("...").above(0)`.
struct Def {
  Key k;
  Def(char const* section, char const* name, Field field) {
    k.section = section;
    k.name = name;
    k.field = field;
  }
  Def&& says(std::string text) && { return k.help = std::move(text), std::move(*this); }
  Def&& in(std::string unit) && { return k.unit = std::move(unit), std::move(*this); }
  Def&& at_least(double v) && { return k.min = v, std::move(*this); }
  Def&& above(double v) && { return k.min = v, k.min_open = true, std::move(*this); }
  Def&& at_most(double v) && { return k.max = v, std::move(*this); }
  Def&& below(double v) && { return k.max = v, k.max_open = true, std::move(*this); }
  Def&& noting(std::string note) && { return k.note = std::move(note), std::move(*this); }
  Def&& one_of(names::Option const& o) && { return k.choices = &o, std::move(*this); }
  Def&& file() && { return k.path = true, std::move(*this); }
  Def&& or_number() && { return k.text_or_number = true, std::move(*this); }
  Def&& along_y() && { return k.three_d = true, std::move(*this); }
  Def&& recorded(bool (*when)(Config const&)) && { return k.recorded = when, std::move(*this); }
  Def&& python(std::string keyword, std::string default_json = "") && {
    return k.python = std::move(keyword), k.python_default = std::move(default_json), std::move(*this);
  }
};
#define KSWEEP_KEY(section, name) Def(#section, #name, &at<&Config::section, &decltype(Config::section)::name>)

bool density(Config const& c) { return c.propagator.physics != "acoustic"; }
bool estimate(Config const& c) { return c.wavelet.source == "estimate"; }
template <auto S, auto M>
bool changed(Config const& c) {
  static Config const defaults;
  return (c.*S).*M != (defaults.*S).*M;
}
#define KSWEEP_CHANGED(section, name) &changed<&Config::section, &decltype(Config::section)::name>

std::vector<Key> make_keys() {
  std::vector<Def> d;
  // [model]
  d.push_back(
      KSWEEP_KEY(model, source)
          .file()
          .says("\"marmousi2\"; also \"marmousi2_fine\", \"marmousi\", the generated 3D \"layered3d\" and "
                "\"marmousi2_3d\", or a path to a raw float32 (`.f32`, `.bin`) or HDF5 file, 2D or 3D, or a SEG-Y "
                "model `.sgy` / `.segy`, IBM or IEEE floats: 2D, one trace per x position; 3D when the traces span "
                "several inlines and crosslines, trace header bytes 189 and 193, inlines along y and crosslines "
                "along x, one trace at each pair"));
  d.push_back(
      KSWEEP_KEY(model, decimate).at_least(1).says("point subsampling of the source grid (v[::d, ::d], dh x d)"));
  d.push_back(KSWEEP_KEY(model, nz).at_least(0).noting("0 = not set").says("cells along z of a raw file"));
  d.push_back(KSWEEP_KEY(model, nx).at_least(0).noting("0 = not set").says("cells along x of a raw file"));
  d.push_back(KSWEEP_KEY(model, dh)
                  .in("m")
                  .at_least(0)
                  .noting("0 = not set")
                  .says("grid spacing: raw files, SEG-Y models and generated models"));
  d.push_back(KSWEEP_KEY(model, ny)
                  .at_least(0)
                  .noting("0 = a 2D model")
                  .says("cells along y: a raw file with ny > 0 is 3D [nz][ny][nx]; the size of a generated 3D model"));
  d.push_back(KSWEEP_KEY(model, units)
                  .one_of(units)
                  .recorded(KSWEEP_CHANGED(model, units))
                  .says("the unit of a model file's values (raw, HDF5, SEG-Y); \"km/s\" is multiplied by 1000"));
  d.push_back(KSWEEP_KEY(model, crop_z).says("half-open cell range [z0, z1) after decimation; unset: the whole model"));
  d.push_back(KSWEEP_KEY(model, crop_x).says("half-open cell range [x0, x1) after decimation; unset: the whole model"));
  d.push_back(KSWEEP_KEY(model, crop_y).along_y().says("3D: half-open cell range [y0, y1); unset: the whole model"));
  d.push_back(KSWEEP_KEY(model, density)
                  .file()
                  .or_number()
                  .recorded(density)
                  .says("variable density only: \"gardner\" (rho = 310 vp^0.25); a constant in kg/m^3; or a raw / "
                        "HDF5 (dataset \"rho\") / SEG-Y file of the source's shape, decimated and cropped alike, in "
                        "kg/m^3 whatever `units` says of the velocity; a file whose largest density is below 100 "
                        "is refused as g/cm^3"));
  // [time]
  d.push_back(KSWEEP_KEY(time, dt).in("s").above(0).says("time step"));
  d.push_back(KSWEEP_KEY(time, nt).at_least(1).says("time samples of the record"));
  // [wavelet]
  d.push_back(
      KSWEEP_KEY(wavelet, freq)
          .in("Hz")
          .above(0)
          .says("the Ricker wavelet's peak frequency: the source, or the estimate's reference (its band must cover the "
                "data's); below the Nyquist frequency of `time.dt`"));
  d.push_back(KSWEEP_KEY(wavelet, delay).in("s").at_least(0).says("the Ricker wavelet's delay; within the record"));
  d.push_back(KSWEEP_KEY(wavelet, source)
                  .file()
                  .recorded(KSWEEP_CHANGED(wavelet, source))
                  .says("\"ricker\"; \"estimate\": `ksweep fwi` estimates it from the observed data, by "
                        "frequency-domain least squares against the starting model's response to the Ricker "
                        "wavelet; or a wavelet file: `.h5` with dataset `wavelet` and attribute `dt`, as `ksweep "
                        "fwi` writes `wavelet.h5`, the first trace of a `.sgy` / `.segy` file, or text lines \"time "
                        "amplitude\" from 0 s; resampled to `time.dt`, `time.nt`"));
  d.push_back(KSWEEP_KEY(wavelet, stabilisation)
                  .above(0)
                  .below(1)
                  .noting("typical: 1e-3")
                  .recorded(estimate)
                  .says("the estimate's stabilisation, relative to the synthetic data's peak power (\"estimate\" "
                        "only)"));
  // [shots]
  d.push_back(KSWEEP_KEY(shots, count).at_least(1).says("shots, evenly spaced over `x_range`, both ends included"));
  d.push_back(KSWEEP_KEY(shots, z).at_least(0).noting("a cell index").says("source depth as a cell index"));
  d.push_back(KSWEEP_KEY(shots, x_range).says("fractions of the model width, 0 <= lo < hi <= 1"));
  d.push_back(KSWEEP_KEY(shots, count_y).at_least(1).along_y().says("3D: lines of `count` shots along y"));
  d.push_back(KSWEEP_KEY(shots, y_range).along_y().says("3D: the lines' span, fractions of the extent along y"));
  // [receivers]
  d.push_back(KSWEEP_KEY(receivers, count).at_least(1).says("receivers, evenly spaced over the full width"));
  d.push_back(KSWEEP_KEY(receivers, z).at_least(0).noting("a cell index").says("receiver depth as a cell index"));
  d.push_back(KSWEEP_KEY(receivers, count_y)
                  .at_least(1)
                  .along_y()
                  .says("3D: lines of `count` receivers along y (an areal patch when > 1)"));
  d.push_back(KSWEEP_KEY(receivers, y_range).along_y().says("3D: the lines' span, fractions of the extent along y"));
  // [propagator]
  d.push_back(KSWEEP_KEY(propagator, order)
                  .one_of(names::order)
                  .python("order")
                  .says("order of the centred differences in space"));
  d.push_back(KSWEEP_KEY(propagator, pml_width)
                  .in("cells")
                  .at_least(0)
                  .python("pml_width")
                  .says("cells of the absorbing layer (CPML) on each face; 0: none, the grid's edges reflect "
                        "(the wavefield is zero beyond them; constant density)"));
  d.push_back(KSWEEP_KEY(propagator, pml_reflection)
                  .above(0)
                  .below(1)
                  .python("pml_reflection")
                  .says("the layer's theoretical reflection coefficient"));
  d.push_back(KSWEEP_KEY(propagator, pml_freq)
                  .in("Hz")
                  .above(0)
                  .python("pml_freq")
                  .says("the frequency the layer is tuned for; at most the Nyquist frequency of `time.dt`"));
  d.push_back(KSWEEP_KEY(propagator, pml_velocity)
                  .in("m/s")
                  .at_least(0)
                  .noting("0: the model's maximum")
                  .recorded(KSWEEP_CHANGED(propagator, pml_velocity))
                  .python("pml_velocity", "null")
                  .says("the velocity of the layers' damping profiles, fixed for every model an inversion tries "
                        "when set; 0: the model's maximum velocity"));
  d.push_back(KSWEEP_KEY(propagator, free_surface)
                  .python("free_surface")
                  .says("a pressure-free top edge instead of an absorbing layer"));
  d.push_back(KSWEEP_KEY(propagator, precision).one_of(precision).says("compute precision of `ksweep model`"));
  d.push_back(KSWEEP_KEY(propagator, batch).in("shots").at_least(1).says("shots per launch for `ksweep model`"));
  d.push_back(KSWEEP_KEY(propagator, schedule)
                  .one_of(names::schedule)
                  .python("schedule")
                  .says("how host backends order a batch (see \"Schedules\" below)"));
  d.push_back(KSWEEP_KEY(propagator, physics)
                  .one_of(physics)
                  .recorded(density)
                  .says("\"acoustic\": constant density; \"acoustic_vd\": variable density, vp and rho (absorbing "
                        "layers >= order cells)"));
  // [storage]
  d.push_back(KSWEEP_KEY(storage, strategy)
                  .one_of(names::strategy)
                  .python("storage")
                  .says("what the forward pass keeps for the gradient"));
  d.push_back(
      KSWEEP_KEY(storage, location).one_of(names::location).python("storage_location").says("where it is kept"));
  d.push_back(KSWEEP_KEY(storage, dtype)
                  .one_of(names::dtype)
                  .python("storage_dtype")
                  .says("how it is encoded (compute stays fp32)"));
  d.push_back(KSWEEP_KEY(storage, transfer_interval)
                  .in("steps")
                  .at_least(1)
                  .says("steps per transfer to the host or the disk"));
  d.push_back(KSWEEP_KEY(storage, disk_dir)
                  .python("disk_dir")
                  .says("folder of `location = \"disk\"`; empty: the system temporary folder"));
  d.push_back(KSWEEP_KEY(storage, pinned).says("page-locked host memory where the backend has it"));
  d.push_back(KSWEEP_KEY(storage, layer_chain)
                  .recorded(KSWEEP_CHANGED(storage, layer_chain))
                  .python("layer_chain")
                  .says("the gradient takes the chain rule of the absorbing layer's copy of the model's edge cells, "
                        "exact at the outermost cells, saving the layer's cells every step on the device: layer "
                        "cells x batch x nt x 4 bytes, counted by `--dry-run`"));
  // [fwi]
  d.push_back(KSWEEP_KEY(fwi, iterations)
                  .at_least(1)
                  .says("iterations of the run; with `stages` their sum unless given (less stops early)"));
  d.push_back(KSWEEP_KEY(fwi, batch)
                  .in("shots")
                  .at_least(1)
                  .python("batch", "1")
                  .says("Adam's shots per iteration (at most the survey's)"));
  d.push_back(KSWEEP_KEY(fwi, optimizer)
                  .one_of(names::optimizer)
                  .python("optimizer")
                  .says("L-BFGS takes every shot per gradient, without `grad_smooth` or `precondition`"));
  d.push_back(KSWEEP_KEY(fwi, lbfgs_memory)
                  .in("correction pairs")
                  .at_least(1)
                  .at_most(100)
                  .python("lbfgs_memory")
                  .says("L-BFGS only, as `beta1`/`beta2` are Adam's only: an optimizer's key set for the other is "
                        "refused"));
  d.push_back(
      KSWEEP_KEY(fwi, lr).in("m/s").above(0).python("lr").says("Adam's step; L-BFGS: the first step's largest change"));
  d.push_back(KSWEEP_KEY(fwi, beta1).at_least(0).below(1).python("betas[0]").says("Adam's first-moment decay"));
  d.push_back(KSWEEP_KEY(fwi, beta2).at_least(0).below(1).python("betas[1]").says("Adam's second-moment decay"));
  d.push_back(KSWEEP_KEY(fwi, eps).above(0).python("eps").says("Adam's denominator floor"));
  d.push_back(KSWEEP_KEY(fwi, seed).at_least(0).python("seed", "0").says("the batches' random generator"));
  d.push_back(KSWEEP_KEY(fwi, checkpoint_every)
                  .in("iterations")
                  .at_least(0)
                  .noting("0 = never")
                  .says("iterations between checkpoints"));
  d.push_back(KSWEEP_KEY(fwi, vmin).in("m/s").python("vmin").says("the lower bound every velocity keeps; > 0"));
  d.push_back(KSWEEP_KEY(fwi, vmax)
                  .in("m/s")
                  .at_least(0)
                  .noting("0 = the largest velocity time.dt propagates stably")
                  .python("vmax")
                  .says("the upper bound every velocity keeps; 0: the stability limit of `time.dt`"));
  d.push_back(KSWEEP_KEY(fwi, water_rows)
                  .at_least(-1)
                  .noting("-1 = detect")
                  .python("water_rows", "0")
                  .says("rows of the water layer kept fixed; -1: detected from the true model"));
  d.push_back(KSWEEP_KEY(fwi, smooth_sigma)
                  .in("cells")
                  .at_least(0)
                  .says("Gaussian smoothing of the true model that gives the starting model"));
  d.push_back(KSWEEP_KEY(fwi, loss_norm).one_of(loss_norm).python("loss").says("the misfit's normalisation"));
  d.push_back(KSWEEP_KEY(fwi, observed)
                  .file()
                  .says("an `observed.h5`, or SEG-Y shot gathers `.sgy` / `.segy`, to invert instead of modelling "
                        "it; a SEG-Y file's trace headers give the survey unless `survey.file` is set; data of "
                        "another sampling interval or length are resampled, band-limited, to `time.dt` and "
                        "`time.nt`"));
  d.push_back(KSWEEP_KEY(fwi, grad_smooth)
                  .in("cells")
                  .at_least(0)
                  .python("grad_smooth")
                  .says("Gaussian smoothing of the gradient"));
  d.push_back(
      KSWEEP_KEY(fwi, precondition).python("precondition").says("the gradient divided by the source illumination"));
  d.push_back(KSWEEP_KEY(fwi, figures_every)
                  .in("iterations")
                  .at_least(0)
                  .noting("0 = never")
                  .says("iterations between figures"));
  d.push_back(
      KSWEEP_KEY(fwi, save_models)
          .says("the model of every iteration in `models.h5`; every run also writes `synthetic.h5`, the final model's "
                "data "
                "at the observed data's own interval and length, `synthetic.segy` beside a SEG-Y `fwi.observed`, and "
                "`wavelet.h5`: the run's wavelet, the estimate's reference and each stage's wavelet"));
  d.push_back(KSWEEP_KEY(fwi, invert)
                  .one_of(parameter)
                  .recorded(density)
                  .python("invert")
                  .says("variable density: the parameters inverted, [\"vp\", \"rho\"], [\"vp\"] or [\"rho\"]; the "
                        "others held at their start"));
  d.push_back(KSWEEP_KEY(fwi, rho_min)
                  .in("kg/m^3")
                  .recorded(density)
                  .python("rho_min")
                  .says("variable density: the lower bound of the density, > 0"));
  d.push_back(KSWEEP_KEY(fwi, rho_max)
                  .in("kg/m^3")
                  .recorded(density)
                  .python("rho_max")
                  .says("variable density: the upper bound of the density, > rho_min"));
  d.push_back(KSWEEP_KEY(fwi, lr_rho)
                  .in("kg/m^3")
                  .at_least(0)
                  .noting("0: fwi.lr")
                  .recorded(density)
                  .python("lr_rho")
                  .says("variable density: Adam's step for the density; 0: `lr`"));
  d.push_back(
      KSWEEP_KEY(fwi, stages)
          .recorded(KSWEEP_CHANGED(fwi, stages))
          .python("stages", "null")
          .says("frequency continuation: `[{max_freq = 4.0, iterations = 10}, {max_freq = 7.0, iterations = 20}]`, "
                "each stage's observed data and wavelet low-passed with zero phase below `max_freq`, gain 1 / (1 + "
                "(f / max_freq)^12), each record continued past its last sample before the filter so that its cut "
                "end does not ring, and a stage whose low-pass keeps the wavelet (its whole band below `max_freq`, "
                "to 2^-20 of its spectrum's peak) uses data and wavelet as they are; the optimizer restarted at "
                "each stage; stages of falling `max_freq` are warned of; `--resume` continues inside or across "
                "stages with the same bits"));
  // [survey]
  d.push_back(KSWEEP_KEY(survey, file)
                  .file()
                  .recorded(KSWEEP_CHANGED(survey, file))
                  .says("the survey from a CSV file (a header line, then one row per trace: "
                        "`shot,src_x,src_z,rec_x,rec_z` in 2D, with `src_y,rec_y` added in 3D, metres from the "
                        "model's origin, any column order; a shot's rows consecutive) or from a SEG-Y file's trace "
                        "headers; empty: the `[shots]` and `[receivers]` keys lay the survey out"));
  // [parallel]
  d.push_back(KSWEEP_KEY(parallel, domains)
                  .at_least(1)
                  .at_most(4096)
                  .recorded(KSWEEP_CHANGED(parallel, domains))
                  .python("domains", "null")
                  .says("the model split over MPI ranks, `[nx_parts]` (2D) or `[ny_parts, nx_parts]` (3D); the "
                        "ranks form shot groups of one rank per subdomain (`mpirun -np 8` with `domains = [2, 2]` "
                        "gives 2 shot groups); the same bits as one rank; empty: every rank holds the whole model"));
  // [imaging]
  d.push_back(KSWEEP_KEY(imaging, condition)
                  .one_of(condition)
                  .recorded(KSWEEP_CHANGED(imaging, condition))
                  .says("`ksweep rtm`: the correlation of the RTM image (the Born adjoint, or the plain "
                        "cross-correlation of the source and receiver wavefields; one backward pass gives either)"));
  d.push_back(KSWEEP_KEY(imaging, normalize)
                  .recorded(KSWEEP_CHANGED(imaging, normalize))
                  .says("`ksweep rtm`: the RTM image divided by the source illumination (the sum over time of the "
                        "source wavefield squared) plus `stabilization` times its maximum"));
  d.push_back(KSWEEP_KEY(imaging, stabilization)
                  .above(0)
                  .recorded(KSWEEP_CHANGED(imaging, stabilization))
                  .says("`ksweep rtm`: the fraction of the largest source illumination added to every cell's "
                        "before the division (RTM's normalisation, LSRTM's preconditioner)"));
  d.push_back(KSWEEP_KEY(imaging, laplacian)
                  .recorded(KSWEEP_CHANGED(imaging, laplacian))
                  .says("`ksweep rtm`: the negative Laplacian of the RTM image, against the low-wavenumber "
                        "artefacts of turning and back-scattered waves"));
  d.push_back(KSWEEP_KEY(imaging, lsrtm_iterations)
                  .at_least(0)
                  .at_most(1000)
                  .recorded(KSWEEP_CHANGED(imaging, lsrtm_iterations))
                  .says("`ksweep rtm`: iterations of least-squares RTM (conjugate gradients on Born modelling and "
                        "its exact transpose) after the RTM image; 0: none"));
  d.push_back(KSWEEP_KEY(imaging, precondition)
                  .recorded(KSWEEP_CHANGED(imaging, precondition))
                  .says("`ksweep rtm`: least-squares RTM preconditioned by the inverse source illumination (plus "
                        "`stabilization` times its maximum), which balances deep and shallow cells"));
  // [output]
  d.push_back(KSWEEP_KEY(output, segy)
                  .recorded(KSWEEP_CHANGED(output, segy))
                  .says("`ksweep model` also writes `observed.segy`, SEG-Y rev 1 shot gathers whose trace headers "
                        "hold the geometry in metres"));
  std::vector<Key> out;
  for (auto& def : d) out.push_back(std::move(def.k));
  return out;
}
#undef KSWEEP_KEY
#undef KSWEEP_CHANGED

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// The limit as a message says it after "must be".
std::string bound_text(Key const& k) {
  if (k.min && k.max)
    return "in " + std::string(k.min_open ? "(" : "[") + number(*k.min) + ", " + number(*k.max) +
           (k.max_open ? ")" : "]");
  if (k.min) return (k.min_open ? "> " : ">= ") + number(*k.min);
  if (k.max) return (k.max_open ? "< " : "<= ") + number(*k.max);
  return "";
}

/// Checks one number of `k` (`what`: the key, or an element of it); an integer is said as one.
template <class T>
void check_number(Key const& k, std::string const& what, T value) {
  double const v = static_cast<double>(value);
  std::string const text = std::is_integral_v<T> ? std::to_string(value) : number(v);
  KSWEEP_REQUIRE(std::isfinite(v), what << " = " << text << " must be a finite number");
  bool const ok =
      (!k.min || (k.min_open ? v > *k.min : v >= *k.min)) && (!k.max || (k.max_open ? v < *k.max : v <= *k.max));
  KSWEEP_REQUIRE(ok, what << " = " << text << (k.unit.empty() ? "" : " ") << k.unit << " must be " << bound_text(k)
                          << (k.note.empty() ? "" : " (") << k.note << (k.note.empty() ? "" : ")"));
}

void check_name(Key const& k, std::string const& what, std::string const& value) {
  if (k.choices->find(value) >= 0) return;
  std::string const shown_value = k.choices->quoted ? "\"" + shown(value) + "\"" : value;
  KSWEEP_REQUIRE(false, what << " = " << shown_value << " is not allowed (allowed: " << k.choices->allowed() << ")");
}

std::string json_text(nlohmann::json const& j) {
  if (j.is_null()) return "unset";
  if (j.is_string()) return j.get<std::string>().empty() ? "\"\"" : "\"" + j.get<std::string>() + "\"";
  if (j.is_number_float()) return number(j.get<double>());
  if (j.is_array()) {
    std::string s = "[";
    for (std::size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + json_text(j[i]);
    return s + "]";
  }
  return j.dump();
}

}  // namespace

std::string Key::type() const {
  return std::visit(
      [](auto f) -> std::string {
        using T = std::decay_t<decltype(f(std::declval<Config&>()))>;
        if constexpr (std::is_same_v<T, int>) return "integer";
        else if constexpr (std::is_same_v<T, double>) return "number";
        else if constexpr (std::is_same_v<T, bool>) return "boolean";
        else if constexpr (std::is_same_v<T, std::string>) return "string";
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "array of strings";
        else if constexpr (std::is_same_v<T, std::vector<int>>) return "array of integers";
        else if constexpr (std::is_same_v<T, std::array<double, 2>>) return "[lo, hi] numbers";
        else if constexpr (std::is_same_v<T, std::optional<std::array<int, 2>>>) return "[lo, hi) cells";
        else return "array of tables";
      },
      field);
}

std::string Key::limits() const {
  if (choices != nullptr) {
    std::string s;
    for (std::size_t i = 0; i < choices->size(); ++i)
      (s += i ? ", " : "") +=
          choices->quoted ? "\"" + std::string(choices->name(i)) + "\"" : std::string(choices->name(i));
    return s;
  }
  std::string const b = bound_text(*this);
  return b.empty() ? b : (std::holds_alternative<std::vector<int>& (*)(Config&)>(field) ? "each " : "") + b;
}

std::vector<Key> const& keys() {
  static std::vector<Key> const table = make_keys();
  return table;
}

std::vector<std::string> const& key_sections() {
  static std::vector<std::string> const sections = [] {
    std::vector<std::string> s;
    for (auto const& k : keys())
      if (std::find(s.begin(), s.end(), k.section) == s.end()) s.push_back(k.section);
    return s;
  }();
  return sections;
}

Key const* find_key(std::string_view dotted) {
  for (auto const& k : keys())
    if (k.dotted() == dotted) return &k;
  return nullptr;
}

nlohmann::json key_value(Key const& key, Config const& config) {
  // The field functions take a Config&; reading through them changes nothing.
  Config& c = const_cast<Config&>(config);
  return std::visit(
      [&](auto f) -> nlohmann::json {
        auto const& v = f(c);
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::optional<std::array<int, 2>>>) {
          if (!v) return nullptr;
          return nlohmann::json::array({(*v)[0], (*v)[1]});
        } else if constexpr (std::is_same_v<T, std::vector<FwiSection::Stage>>) {
          auto a = nlohmann::json::array();
          for (auto const& st : v) a.push_back({{"max_freq", st.max_freq}, {"iterations", st.iterations}});
          return a;
        } else {
          return nlohmann::json(v);
        }
      },
      key.field);
}

void check_key(Key const& key, Config const& config, std::string const& keyword) {
  Config& c = const_cast<Config&>(config);
  std::string const what = keyword.empty() ? key.dotted() : keyword + " (" + key.dotted() + ")";
  std::visit(
      [&](auto f) {
        auto const& v = f(c);
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, double>) {
          if (key.choices != nullptr) check_name(key, what, std::to_string(v));
          else check_number(key, what, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (key.choices != nullptr) check_name(key, what, v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (key.choices != nullptr)
            for (std::size_t i = 0; i < v.size(); ++i) check_name(key, what + "[" + std::to_string(i) + "]", v[i]);
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          if (key.min || key.max)
            for (std::size_t i = 0; i < v.size(); ++i) check_number(key, what + "[" + std::to_string(i) + "]", v[i]);
        }
      },
      key.field);
}

std::string key_table_markdown() {
  static Config const defaults;
  std::ostringstream os;
  os << "| key | type | default | allowed | meaning | Python |\n|---|---|---|---|---|---|\n";
  for (auto const& k : keys()) {
    std::string type = k.type();
    if (!k.unit.empty()) type += " (" + k.unit + ")";
    std::string limits = k.limits();
    if (!k.note.empty()) limits += (limits.empty() ? "" : "; ") + k.note;
    os << "| `" << k.dotted() << "` | " << type << " | " << json_text(key_value(k, defaults)) << " | " << limits
       << " | " << k.help << (k.three_d ? " (3D only)" : "") << " | " << (k.python.empty() ? "" : "`" + k.python + "`")
       << (k.python_default.empty() ? "" : " (" + k.python_default + ")") << " |\n";
  }
  return os.str();
}

std::string key_table_text() {
  static Config const defaults;
  std::ostringstream os;
  for (auto const& k : keys()) {
    os << k.dotted() << " (" << k.type() << (k.unit.empty() ? "" : ", " + k.unit) << "), default "
       << json_text(key_value(k, defaults));
    std::string const limits = k.limits();
    if (!limits.empty()) os << ", " << (k.choices != nullptr ? "one of " : "") << limits;
    if (!k.python.empty()) os << ", Python: " << k.python;
    os << "\n    " << k.help << "\n";
  }
  return os.str();
}

}  // namespace ksweep::io
