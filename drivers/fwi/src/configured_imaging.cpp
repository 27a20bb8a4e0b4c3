// A run from its configuration (configured.hpp): the modelling set-up of the propagator keys, and
// imaging (RTM, least-squares RTM) on a background model.

#include <ksweep/base/error.hpp>
#include <ksweep/core/profiling.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/fwi/configured.hpp>
#include <ksweep/fwi/imaging.hpp>
#include <ksweep/fwi/modeling.hpp>
#include <ksweep/storage/step_store.hpp>

#include <algorithm>
#include <tuple>

namespace ksweep::fwi {

ModelingSetup modeling_setup(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey) {
  ModelingSetup setup;
  setup.grid = model_grid(vm);
  setup.pml = make_pml(cfg);
  setup.order = cfg.propagator.order;
  setup.dt = cfg.time.dt;
  setup.nt = cfg.time.nt;
  setup.survey = survey;
  setup.batch = std::min(cfg.propagator.batch, survey.n_shots);
  setup.schedule = core::parse_schedule(cfg.propagator.schedule);
  setup.physics = parse_physics(cfg.propagator.physics);
  setup.storage = storage::make_storage_config(cfg.storage.strategy, cfg.storage.location, cfg.storage.dtype,
                                               cfg.storage.transfer_interval, cfg.storage.disk_dir, cfg.storage.pinned);
  return setup;
}

namespace {

template <class Real>
ImagingResult image(io::Config const& cfg, io::VelocityModel const& vm, std::vector<float> const& v0,
                    core::Survey const& survey, std::vector<double> const& wavelet, std::vector<float> const& observed,
                    int water_rows, std::vector<float> const* density,
                    std::function<void(int, double)> const& after_iteration, comm::Communicator const* ranks) {
  int const nt = cfg.time.nt, n_shots = survey.n_shots;
  std::size_t const n_records = static_cast<std::size_t>(n_shots) * nt * survey.n_receivers;
  KSWEEP_REQUIRE(observed.size() == n_records,
                 "imaging: the observed data hold " << observed.size() << " samples, the survey needs " << n_records);
  KSWEEP_REQUIRE(v0.size() == vm.vp.size(),
                 "imaging: the background has " << v0.size() << " cells, the model " << vm.vp.size());
  ModelingSetup setup = modeling_setup(cfg, vm, survey);
  if (ranks) {  // the shots over the ranks: shot groups of one rank, or of one rank per subdomain
    setup.domains = domain_split(cfg, setup.grid);
    setup.ranks = *ranks;
  }
  Modeling<Real> m(setup);
  std::vector<std::vector<Real>> fields{{v0.begin(), v0.end()}};  // one per parameter, vp first
  if (has_parameter(setup.physics, "rho")) {
    KSWEEP_REQUIRE(density, "imaging with variable density needs the density");
    fields.emplace_back(density->begin(), density->end());
  }
  std::vector<Real const*> model;
  for (auto const& f : fields) model.push_back(f.data());
  m.set_model(model, model);  // the layer held at the background model
  std::vector<Real> w(static_cast<std::size_t>(n_shots) * nt);
  for (int s = 0; s < n_shots; ++s)
    for (int t = 0; t < nt; ++t) w[static_cast<std::size_t>(s) * nt + t] = static_cast<Real>(wavelet[t]);
  std::vector<Real> const d(observed.begin(), observed.end());
  // The water rows muted: a depth row is a plane of ny nx cells.
  std::vector<double> mask(v0.size(), 1.0);
  std::fill(mask.begin(),
            mask.begin() +
                std::min<std::size_t>(mask.size(), std::size_t(std::max(water_rows, 0)) * std::max(vm.ny, 1) * vm.nx),
            0.0);
  RtmOptions o;
  o.mask = mask;
  o.condition = parse_image_condition(cfg.imaging.condition);
  o.normalize = cfg.imaging.normalize;
  o.stabilization = cfg.imaging.stabilization;
  o.laplacian = cfg.imaging.laplacian;
  ImagingResult r;
  core::ScopedRegion region("ksweep::rtm::image");
  if (cfg.imaging.lsrtm_iterations > 0) {
    LsrtmOptions lo;
    lo.iterations = cfg.imaging.lsrtm_iterations;
    lo.precondition = cfg.imaging.precondition;
    lo.stabilization = cfg.imaging.stabilization;
    lo.mask = mask;
    std::tie(r.rtm, r.lsrtm) = rtm_and_lsrtm(m, w.data(), d.data(), o, lo, after_iteration);
  } else {
    r.rtm = rtm(m, w.data(), d.data(), o);
  }
  return r;
}

}  // namespace

ImagingResult image_data(io::Config const& cfg, io::VelocityModel const& vm, std::vector<float> const& v0,
                         core::Survey const& survey, std::vector<double> const& wavelet,
                         std::vector<float> const& observed, int water_rows, std::vector<float> const* density,
                         std::function<void(int, double)> const& after_iteration, comm::Communicator const* ranks) {
  return cfg.propagator.precision == "fp64"
             ? image<double>(cfg, vm, v0, survey, wavelet, observed, water_rows, density, after_iteration, ranks)
             : image<float>(cfg, vm, v0, survey, wavelet, observed, water_rows, density, after_iteration, ranks);
}

}  // namespace ksweep::fwi
