#include <ksweep/fwi/memory.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/storage/codec.hpp>
#include <ksweep/storage/step_store.hpp>

#include <Kokkos_Core.hpp>

#include "built.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <sys/resource.h>
#include <sys/statvfs.h>

namespace ksweep::fwi {
namespace {

using sz = std::size_t;

/// What the memory estimate needs of a physics' core type (core/physics.hpp), at one order and
/// dimension: the reach of its stencil (the fields' halo), the reach of its layer terms
/// (core::layer_term_cells) and what its coefficients hold beyond c.
struct PhysicsMemory {
  int radius = -1;
  int term_reach = 0;
  std::vector<core::CoefficientMemory> (*coefficients)(core::Layout const&, std::size_t) = nullptr;
};

PhysicsMemory physics_memory(Physics physics, int order, int dim) {
  return core::dispatch_order(order, [&](auto o) {
    return detail::with_physics(physics, [&](auto ph) {
      constexpr int O = decltype(o)::value;
      using P = typename decltype(ph)::type;
      auto one = [](auto d) {
        constexpr int D = decltype(d)::value;
        using cell = typename P::template cell<float, O, D>;
        return PhysicsMemory{cell::R, cell::forward_reach,
                             &P::template coefficients<float, O, Kokkos::HostSpace, D>::memory_items};
      };
      return dim == 3 ? one(std::integral_constant<int, 3>{}) : one(std::integral_constant<int, 2>{});
    });
  });
}

/// The padded grid of a run (core::Layout) and the model's cells; the sizes of what the
/// propagator and the gradient engine allocate on it come from core/sizes.hpp, the functions
/// those allocations use, and from the physics (PhysicsMemory).
struct Padded {
  PhysicsMemory physics;
  core::Layout l;
  sz n;
  Padded(RunShape const& s, core::ModelGrid const& grid, core::PmlConfig const& pml)
      : physics(physics_memory(s.physics, s.order, grid.dim())),
        l(grid, pml, s.order, physics.radius),
        n(static_cast<sz>(grid.cells())) {}
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

/// What the physics' coefficients hold beyond c (variable density: the buoyancy per axis on the
/// device, the padded model and the coefficients' mirrors on the host).
void add_coefficients(MemoryEstimate& e, Padded const& L, sz real) {
  for (auto const& c : L.physics.coefficients(L.l, real))
    e.items.push_back({c.what, c.device ? Place::device : Place::host, c.bytes});
}

// The gradient's saved steps of S shots (`storage`, values of R bytes, nt steps), their staging
// off the device, and the layer terms of the model cells next to the layer (constant density),
// every step. Returns the saved values per shot and step (the ring).
sz add_saved_steps(MemoryEstimate& e, Padded const& L, storage::StorageConfig const& storage, sz S, sz R, sz nt) {
  sz const ring = static_cast<sz>(core::ring_stride(L.l, storage.strategy == storage::Strategy::full, storage.dtype));
  auto const store =
      core::store_bytes(storage, storage::encoded_bytes(storage.dtype, S * ring, R), static_cast<int>(nt));
  Place const where = storage.location == storage::Location::device ? Place::device
                      : storage.location == storage::Location::host ? Place::host
                                                                    : Place::disk;
  e.items.push_back({"saved steps (" + storage::to_string(storage.strategy) + ", " + storage::to_string(storage.dtype) +
                         ", " + storage::to_string(storage.location) + ")",
                     where, store.stored});
  if (where != Place::device) e.items.push_back({"transfer staging", Place::device, store.staging});
  e.items.push_back({"layer terms of the cells next to the layer (every step)", Place::device,
                     S * nt * static_cast<sz>(core::layer_term_cells(L.l, L.physics.term_reach)) * R});
  return ring;
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
  sz const ring = add_saved_steps(e, L, scfg, S, R, nt);
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
  auto const& parameters = physics_parameters(shape.physics);
  sz const params = parameters.size();
  // The model, its gradient, the true and held parameters (4 vectors), then the optimizer's
  // own (optimizer_vectors: Adam's two moments, or L-BFGS's pairs and working vectors).
  bool const lbfgs = options.method == Method::lbfgs;
  add(lbfgs ? "models and L-BFGS's " + std::to_string(options.lbfgs.memory) + " correction pairs"
            : "models and Adam moments",
      Place::device, params * (4 + optimizer_vectors(options)) * n * R);
  add("host copies of models and images", Place::host, params * 8 * n * sizeof(double));
  for (sz p = 1; p < params; ++p)  // the first parameter's are the images above
    add(std::string(parameters[p].noun) + " gradient images (per shot and summed)", Place::device,
        (S + 1) * n * sizeof(double));
  add_coefficients(e, L, R);
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
  add_coefficients(e, L, R);
  return e;
}

MemoryEstimate estimate_imaging(RunShape const& shape, storage::StorageConfig const& storage, bool fp64, int batch,
                                int lsrtm_iterations, int ranks, core::DomainSplit const& split) {
  int const groups = std::max(1, ranks / std::max(1, split.count()));
  int const mine = (shape.n_shots + groups - 1) / groups;  // the most shots of a shot group
  Padded const L = largest_part(shape, split);
  sz const S = static_cast<sz>(std::max(1, std::min(batch > 0 ? batch : mine, mine))), R = fp64 ? 8 : 4;
  sz const n = static_cast<sz>(shape.grid.cells()), part = static_cast<sz>(L.l.model_rows()) * L.l.nx;
  sz const nt = static_cast<sz>(shape.nt), nr = static_cast<sz>(shape.n_receivers);
  sz const records = static_cast<sz>(shape.n_shots) * nt * nr;
  bool const lsrtm = lsrtm_iterations > 0;
  MemoryEstimate e;
  e.phase = std::string(lsrtm ? "RTM and LSRTM" : "RTM") + " (per rank, " + std::to_string(S) + " shot(s) per launch";
  if (split.split()) e.phase += ", parallel.domains " + core::describe(split, L.l.dim);
  e.phase += ")";
  auto add = [&](std::string w, Place p, sz b) { e.items.push_back({std::move(w), p, b}); };
  int const shots = static_cast<int>(S);
  int const states = lsrtm ? 3 : 2;  // background, adjoint (and Born's scattered field)
  sz const levels = static_cast<sz>(states) * 2 * core::level_values(L.l, shots) * R;
  add(lsrtm ? "wavefields, forward + adjoint + scattered (2 levels each)"
            : "wavefields, forward + adjoint (2 levels each)",
      Place::device, levels);
  add("absorbing-layer fields", Place::device, static_cast<sz>(states) * core::state_values(L.l, shots) * R - levels);
  add(lsrtm ? "velocity coefficients and Born's scale" : "velocity coefficients", Place::device,
      (lsrtm ? 2 : 1) * core::coefficient_values(L.l) * R);
  sz const ring = add_saved_steps(e, L, storage, S, R, nt);
  add("ring staging of the shots schedule", Place::device,
      S * ring * R * static_cast<sz>(core::chunk_steps(shots, static_cast<long long>(ring), R)));
  add("records of the batch and wavelets", Place::device, 2 * S * nt * nr * R + S * nt * R);
  // Per shot and summed; kept per shot over a rank's batches where ranks add them in a chain.
  sz const kept = groups > 1 && static_cast<int>(S) < mine ? static_cast<sz>(mine) * 3 * part * sizeof(double) : 0;
  add("images (per shot and summed)", Place::device,
      core::image_bytes(L.l, shots) + (split.split() ? 6 : 3) * n * sizeof(double) + kept);
  // The data (float), the reflected data and the residuals in double (LSRTM: data, residual and
  // J p), the records of a call in the propagator's precision.
  add("data and residuals of every shot", Place::host, records * (4 + (lsrtm ? 3 : 1) * 8 + 2 * R));
  add("images and conjugate-gradient vectors", Place::host, (lsrtm ? 12 : 6) * n * sizeof(double));
  add_coefficients(e, L, R);
  return e;
}

namespace {

/// A number from a one-line file (cgroup limits); 0 when absent or "max".
std::size_t read_number(std::string const& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return 0;
  return static_cast<std::size_t>(std::strtoull(s.c_str(), nullptr, 10));
}

}  // namespace

MachineMemory machine_memory(bool disk, std::string const& disk_dir) {
  MachineMemory mm;
  mm.device_is_host =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
#if defined(KOKKOS_ENABLE_CUDA)
  if (!mm.device_is_host) {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) mm.device_available = free;
  }
#endif
  if (char const* e = std::getenv("KSWEEP_DEVICE_MEMORY_AVAILABLE"); e != nullptr && *e != '\0' && !mm.device_is_host)
    mm.device_available = static_cast<sz>(std::strtoull(e, nullptr, 10));
  if (char const* e = std::getenv("KSWEEP_MEMORY_AVAILABLE"); e != nullptr && *e != '\0') {
    mm.host_available = static_cast<sz>(std::strtoull(e, nullptr, 10));
  } else {
    std::ifstream in("/proc/meminfo");
    std::string key;
    sz value = 0;
    std::string unit;
    while (in >> key >> value) {
      std::getline(in, unit);
      if (key == "MemAvailable:") {
        mm.host_available = value * 1024;
        break;
      }
    }
    // cgroup v2, then v1.
    sz const max2 = read_number("/sys/fs/cgroup/memory.max");
    if (max2 > 0) {
      sz const cur = read_number("/sys/fs/cgroup/memory.current");
      sz const left = max2 > cur ? max2 - cur : 0;
      if (mm.host_available == 0 || left < mm.host_available) mm.host_available = left;
    } else {
      sz const max1 = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
      sz const use1 = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
      if (max1 > 0 && max1 < (sz(1) << 60)) {
        sz const left = max1 > use1 ? max1 - use1 : 0;
        if (mm.host_available == 0 || left < mm.host_available) mm.host_available = left;
      }
    }
  }
  // An address-space limit (ulimit -v) caps what this process can allocate, whatever is free.
  struct rlimit rl {};
  if (std::getenv("KSWEEP_MEMORY_AVAILABLE") == nullptr && ::getrlimit(RLIMIT_AS, &rl) == 0 &&
      rl.rlim_cur != RLIM_INFINITY) {
    sz used = 0;
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
      if (key == "VmSize:") {
        in >> used;
        used *= 1024;
        break;
      }
      std::getline(in, key);
    }
    sz const left = static_cast<sz>(rl.rlim_cur) > used ? static_cast<sz>(rl.rlim_cur) - used : 0;
    if (mm.host_available == 0 || left < mm.host_available) {
      mm.host_available = left;
      mm.per_process = true;
    }
  }
  if (disk) {
    std::error_code ec;
    std::filesystem::path dir =
        disk_dir.empty() ? std::filesystem::temp_directory_path(ec) : std::filesystem::path(disk_dir);
    struct statvfs st {};
    if (!ec && ::statvfs(dir.c_str(), &st) == 0) mm.disk_available = static_cast<sz>(st.f_bavail) * st.f_frsize;
  }
  return mm;
}

std::string memory_table(std::vector<MemoryEstimate> const& phases, MachineMemory const& mm, int local_ranks) {
  std::ostringstream os;
  auto mib = [](sz b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%12.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
    return std::string(buf);
  };
  for (auto const& ph : phases) {
    os << "memory estimate, " << ph.phase << ":\n";
    for (auto const& i : ph.items) {
      char line[160];
      std::snprintf(line, sizeof line, "  %-66s %-6s %s\n", i.what.c_str(), to_string(i.place).c_str(),
                    mib(i.bytes).c_str());
      os << line;
    }
    for (Place p : {Place::device, Place::host, Place::disk}) {
      if (ph.total(p) == 0) continue;
      char line[160];
      std::snprintf(line, sizeof line, "  %-66s %-6s %s\n", "total", to_string(p).c_str(), mib(ph.total(p)).c_str());
      os << line;
    }
  }
  os << "available: host memory " << (mm.host_available ? mib(mm.host_available) : std::string("unknown"));
  if (mm.per_process) os << " per rank (its address-space limit)";
  else if (local_ranks > 1) os << " for " << local_ranks << " ranks on this node";
  if (mm.device_is_host) os << " (the device is the host)";
  else if (mm.device_available) os << "; device memory " << mib(mm.device_available);
  else os << "; device memory unknown (not checked)";
  if (mm.disk_available) os << "; disk " << mib(mm.disk_available);
  os << "\n";
  return os.str();
}

void check_memory(std::vector<MemoryEstimate> const& phases, MachineMemory const& mm, int local_ranks) {
  for (auto const& ph : phases) {
    sz const ranks = mm.per_process ? 1 : static_cast<sz>(std::max(local_ranks, 1));
    sz const host = (ph.total(Place::host) + (mm.device_is_host ? ph.total(Place::device) : 0)) * ranks;
    if (mm.host_available > 0 && host > mm.host_available) {
      std::ostringstream os;
      os << "the run does not fit in memory: " << ph.phase << " needs about " << host / (1024 * 1024) << " MiB"
         << (ranks > 1 ? " for the ranks on this node" : "") << ", " << mm.host_available / (1024 * 1024)
         << " MiB are available; use fewer shots per launch (fwi.batch over more ranks, propagator.batch), "
            "storage.location = \"disk\" or a smaller storage.dtype, or a smaller model or time.nt\n"
         << memory_table(phases, mm, local_ranks);
      throw Error(os.str());
    }
    // Each rank's device part against the free memory of the device it sees.
    sz const device = ph.total(Place::device);
    if (!mm.device_is_host && mm.device_available > 0 && device > mm.device_available) {
      std::ostringstream os;
      os << "the run does not fit in device memory: " << ph.phase << " needs about " << device / (1024 * 1024)
         << " MiB on the device, " << mm.device_available / (1024 * 1024)
         << " MiB are free; use fewer shots per launch (fwi.batch over more ranks), storage.location = \"host\" or "
            "\"disk\", or a smaller storage.dtype\n"
         << memory_table(phases, mm, local_ranks);
      throw Error(os.str());
    }
    sz const disk = ph.total(Place::disk) * static_cast<sz>(std::max(local_ranks, 1));  // one disk per node
    if (mm.disk_available > 0 && disk > mm.disk_available) {
      std::ostringstream os;
      os << "the saved steps do not fit on the disk: " << ph.phase << " needs about " << disk / (1024 * 1024)
         << " MiB in storage.disk_dir, " << mm.disk_available / (1024 * 1024)
         << " MiB are free; free space, choose another storage.disk_dir, or use a smaller storage.dtype\n"
         << memory_table(phases, mm, local_ranks);
      throw Error(os.str());
    }
  }
}

}  // namespace ksweep::fwi
