#include <ksweep/fwi/memory.hpp>

#include <ksweep/core/sizes.hpp>
#include <ksweep/storage/codec.hpp>
#include <ksweep/storage/step_store.hpp>

#include <algorithm>
#include <string>

namespace ksweep::fwi {
namespace {

using sz = std::size_t;

bool variable_density(RunShape const& s) { return s.physics == Physics::acoustic_vd; }

/// The padded grid of a run (core::Layout) and the model's cells; the sizes of what the
/// propagator and the gradient engine allocate on it come from core/sizes.hpp, the functions
/// those allocations use.
struct Padded {
  core::Layout l;
  sz n;
  bool vd;  ///< variable density: the stencil reaches 2M - 1 cells, buoyancy per axis
  Padded(RunShape const& s, core::ModelGrid const& grid, core::PmlConfig const& pml)
      : l(grid, pml, s.order, variable_density(s) ? 2 * (s.order / 2) - 1 : -1),
        n(static_cast<sz>(grid.cells())),
        vd(variable_density(s)) {}
  explicit Padded(RunShape const& s) : Padded(s, s.grid, s.pml) {}
};

/// The largest subdomain of `split` (the most padded cells): what one rank of the split holds.
Padded largest_part(RunShape const& s, core::DomainSplit const& split) {
  if (!split.split()) return Padded(s);
  Padded best(s);
  long long most = -1;
  for (int i = 0; i < split.count(); ++i) {
    auto const d = core::subdomain(s.grid, s.pml, split, i, 1.0);
    Padded const p(s, d.grid, d.pml);
    if (p.l.padded_cells() > most) {
      most = p.l.padded_cells();
      best = p;
    }
  }
  return best;
}

/// Variable density: its buoyancy coefficients (one field per axis) on the device, and the
/// padded vp and rho (double) with the coefficients' mirrors that set_model builds on the host.
void add_density(MemoryEstimate& e, Padded const& L, sz real) {
  if (!L.vd) return;
  sz const coef = core::coefficient_values(L.l);
  e.items.push_back({"buoyancy coefficients (per axis)", Place::device, static_cast<sz>(L.l.dim) * coef * real});
  e.items.push_back({"density model: padded vp and rho, coefficient mirrors", Place::host,
                     2 * static_cast<sz>(L.l.padded_cells()) * sizeof(double) + (1 + L.l.dim) * coef * real});
}

}  // namespace

std::size_t MemoryEstimate::total(Place p) const {
  sz t = 0;
  for (auto const& i : items)
    if (i.place == p) t += i.bytes;
  return t;
}

std::string to_string(Place place) {
  return place == Place::device ? "device" : place == Place::host ? "host" : "disk";
}

RunShape run_shape(Problem const& problem) {
  RunShape s;
  s.grid = problem.grid;
  s.pml = problem.pml;
  s.order = problem.order;
  s.physics = problem.physics;
  s.nt = problem.nt;
  s.n_shots = problem.survey.n_shots;
  s.n_receivers = problem.survey.n_receivers;
  return s;
}

MemoryEstimate estimate_inversion(RunShape const& shape, Options const& options, int ranks) {
  auto const& split = options.domains;
  int const batch = options.method == Method::lbfgs ? shape.n_shots : options.batch;
  int const groups = std::max(1, ranks / std::max(1, split.count()));
  int const shots_per_rank = (batch + groups - 1) / groups;
  // A split model: the propagation on the largest subdomain, the optimizer on the whole model.
  Padded const L = largest_part(shape, split);
  sz const S = static_cast<sz>(std::max(shots_per_rank, 1)), R = sizeof(float), n = static_cast<sz>(shape.grid.cells());
  sz const nt = static_cast<sz>(shape.nt), nr = static_cast<sz>(shape.n_receivers);
  MemoryEstimate e;
  e.phase = "inversion (per rank, " + std::to_string(S) + " shot(s) per launch";
  if (split.split()) {
    std::string const cells =
        L.l.dim == 3 ? std::to_string(L.l.nz) + " x " + std::to_string(L.l.ny) + " x " + std::to_string(L.l.nx)
                     : std::to_string(L.l.nz) + " x " + std::to_string(L.l.nx);
    e.phase += ", parallel.domains " + core::describe(split, L.l.dim) + ": subdomains up to " + cells + " cells";
  }
  e.phase += ")";
  auto add = [&](std::string w, Place p, sz b) { e.items.push_back({std::move(w), p, b}); };
  int const shots = static_cast<int>(S);
  sz const levels = 2 * 2 * core::level_values(L.l, shots) * R;
  add("wavefields, forward + adjoint (2 levels each)", Place::device, levels);
  add("absorbing-layer fields, forward + adjoint", Place::device, 2 * core::state_values(L.l, shots) * R - levels);
  add("velocity coefficients", Place::device, core::coefficient_values(L.l) * R);
  storage::StorageConfig const& scfg = options.storage;
  sz const ring = static_cast<sz>(core::ring_stride(L.l, scfg.strategy == storage::Strategy::full, scfg.dtype));
  sz const step = storage::encoded_bytes(scfg.dtype, S * ring, R);
  auto const store = core::store_bytes(scfg, step, static_cast<int>(nt));
  Place const where = scfg.location == storage::Location::device ? Place::device
                      : scfg.location == storage::Location::host ? Place::host
                                                                 : Place::disk;
  add("saved steps (" + storage::to_string(scfg.strategy) + ", " + storage::to_string(scfg.dtype) + ", " +
          storage::to_string(scfg.location) + ")",
      where, store.stored);
  if (where != Place::device) add("transfer staging", Place::device, store.staging);
  // The layer terms of the model cells next to the layer (constant density), every step.
  add("layer terms of the cells next to the layer (every step)", Place::device,
      S * nt * static_cast<sz>(core::layer_term_cells(L.l, L.vd ? 0 : L.l.radius)) * R);
  // The layer's chain rule (storage.layer_chain): the layer's differences every step, the last
  // three levels and the per-shot sums.
  if (scfg.layer_chain) {
    sz const cells = static_cast<sz>(core::layer_cells(L.l));
    add("absorbing layer's cells (storage.layer_chain, every step)", Place::device,
        S * (nt + 3) * cells * R + S * cells * sizeof(double));
  }
  // The `shots` schedule stages a chunk of steps of raw ring values between the shots' time
  // loops and the codec (core::chunk_steps); counted whatever the schedule.
  add("ring staging of the shots schedule", Place::device,
      S * ring * R * static_cast<sz>(core::chunk_steps(shots, static_cast<long long>(ring), R)));
  add("records of the batch (observed, synthetic, residual) and wavelets", Place::device,
      3 * S * nt * nr * R + S * nt * R);
  add("observed data of every shot", Place::host, static_cast<sz>(shape.n_shots) * nt * nr * R + S * nt * nr * R);
  add("gradient and illumination images (per shot and summed)", Place::device,
      core::image_bytes(L.l, shots) + (split.split() ? 6 : 3) * n * sizeof(double));
  sz const params = L.vd ? 2 : 1;
  // The model, its gradient, the true and held parameters (4 vectors), then the optimizer's
  // own (optimizer_vectors: Adam's two moments, or L-BFGS's pairs and working vectors).
  bool const lbfgs = options.method == Method::lbfgs;
  add(lbfgs ? "models and L-BFGS's " + std::to_string(options.lbfgs.memory) + " correction pairs"
            : "models and Adam moments",
      Place::device, params * (4 + optimizer_vectors(options)) * n * R);
  add("host copies of models and images", Place::host, params * 8 * n * sizeof(double));
  if (L.vd) add("density gradient images (per shot and summed)", Place::device, (S + 1) * n * sizeof(double));
  add_density(e, L, R);
  return e;
}

MemoryEstimate estimate_modeling(RunShape const& shape, bool fp64, int batch, core::DomainSplit const& split) {
  Padded const L = largest_part(shape, split);
  sz const S = static_cast<sz>(std::max(1, std::min(batch, shape.n_shots))), R = fp64 ? 8 : 4;
  sz const nt = static_cast<sz>(shape.nt), nr = static_cast<sz>(shape.n_receivers);
  MemoryEstimate e;
  e.phase = "forward modelling (" + std::to_string(S) + " shot(s) per launch";
  if (split.split()) e.phase += ", parallel.domains " + core::describe(split, L.l.dim);
  e.phase += ")";
  auto add = [&](std::string w, Place p, sz b) { e.items.push_back({std::move(w), p, b}); };
  int const shots = static_cast<int>(S);
  add("wavefields (2 levels)", Place::device, 2 * core::level_values(L.l, shots) * R);
  add("absorbing-layer fields", Place::device,
      (core::state_values(L.l, shots) - 2 * core::level_values(L.l, shots)) * R);
  add("velocity coefficients", Place::device, core::coefficient_values(L.l) * R);
  add("records and wavelets of the batch", Place::device, S * nt * nr * R + S * nt * R);
  add("records of every shot", Place::host, static_cast<sz>(shape.n_shots) * nt * nr * 4 + S * nt * nr * R);
  add_density(e, L, R);
  return e;
}

}  // namespace ksweep::fwi
