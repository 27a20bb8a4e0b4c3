#include "memory_estimate.hpp"

#include "common.hpp"
#include "fwi_inputs.hpp"

#include <ksweep/base/error.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/fwi/inversion.hpp>

#include <Kokkos_Core.hpp>

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

namespace ksweep::app {

namespace {

using sz = std::size_t;

/// The sizes of a run of the configuration on the model `vm` (its shape is what counts).
fwi::RunShape shape_of(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers) {
  fwi::RunShape s;
  s.grid = model_grid(vm);
  s.pml = make_pml(cfg);
  s.order = cfg.propagator.order;
  s.physics = fwi::parse_physics(cfg.propagator.physics);
  s.nt = cfg.time.nt;
  s.n_shots = n_shots;
  s.n_receivers = n_receivers;
  return s;
}

std::size_t read_number(std::string const& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return 0;
  return static_cast<std::size_t>(std::strtoull(s.c_str(), nullptr, 10));
}

}  // namespace

MemoryEstimate estimate_fwi(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers, int ranks,
                            core::DomainSplit const& split) {
  fwi::Options o = inversion_options(cfg, model_grid(vm), 0);  // the options the run will take
  o.domains = split;
  return fwi::estimate_inversion(shape_of(cfg, vm, n_shots, n_receivers), o, ranks);
}

MemoryEstimate estimate_model(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                              bool fp64, int batch, core::DomainSplit const& split) {
  return fwi::estimate_modeling(shape_of(cfg, vm, n_shots, n_receivers), fp64, batch, split);
}

MachineMemory machine_memory(io::Config const& cfg) {
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
  if (cfg.storage.location == "disk") {
    std::error_code ec;
    std::filesystem::path dir = cfg.storage.disk_dir.empty() ? std::filesystem::temp_directory_path(ec)
                                                             : std::filesystem::path(cfg.storage.disk_dir);
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
      std::snprintf(line, sizeof line, "  %-66s %-6s %s\n", i.what.c_str(), fwi::to_string(i.place).c_str(),
                    mib(i.bytes).c_str());
      os << line;
    }
    for (Place p : {Place::device, Place::host, Place::disk}) {
      if (ph.total(p) == 0) continue;
      char line[160];
      std::snprintf(line, sizeof line, "  %-66s %-6s %s\n", "total", fwi::to_string(p).c_str(),
                    mib(ph.total(p)).c_str());
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

std::string smallest_split(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                           MachineMemory const& mm, core::DomainSplit const& tried) {
  core::ModelGrid const grid = model_grid(vm);
  int const radius = cfg.propagator.order / 2, dim = grid.dim();
  auto fits = [&](core::DomainSplit const& s) {
    try {
      core::check_split(grid, s, radius, s.count());
      check_memory({estimate_fwi(cfg, vm, n_shots, n_receivers, s.count(), s)}, mm, s.count());  // one shot group
      return true;
    } catch (Error const&) {
      return false;
    }
  };
  // The fewest subdomains first; in 3D the squarest split of a count first.
  for (int count = std::max(2, tried.count() + 1); count <= 256; ++count) {
    std::vector<core::DomainSplit> candidates;
    if (dim == 2) {
      candidates.push_back({1, count, tried.align});
    } else {
      for (int ny = 1; ny <= count; ++ny)
        if (count % ny == 0) candidates.push_back({ny, count / ny, tried.align});
      std::sort(candidates.begin(), candidates.end(), [](auto const& a, auto const& b) {
        return std::abs(a.ny_parts - a.nx_parts) < std::abs(b.ny_parts - b.nx_parts);
      });
    }
    for (auto const& s : candidates)
      if (fits(s)) {
        std::string const list = dim == 3 ? "[" + std::to_string(s.ny_parts) + ", " + std::to_string(s.nx_parts) + "]"
                                          : "[" + std::to_string(s.nx_parts) + "]";
        return "the smallest split of the model whose inversion fits: parallel.domains = " + list + " on " +
               std::to_string(s.count()) + " ranks (one shot group; with " + std::to_string(s.count()) +
               " ranks per node the node's memory is shared: see the table)\n";
      }
  }
  return "no split of the model into up to 256 domains fits\n";
}

}  // namespace ksweep::app
