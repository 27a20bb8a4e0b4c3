#pragma once
// The memory a run will need (the library's estimate, ksweep/fwi/memory.hpp, of the
// configuration's sizes) checked against what the machine has.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/fwi/memory.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/velocity.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ksweep::app {

// The estimates are the library's (ksweep/fwi/memory.hpp), from the configuration's sizes.
using fwi::MemoryEstimate;
using fwi::MemoryItem;
using fwi::Place;

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

/// What this machine offers: host memory available to this process (MemAvailable, lowered to
/// the cgroup limit when there is one; KSWEEP_MEMORY_AVAILABLE in bytes overrides), and
/// whether the device memory is the host memory.
struct MachineMemory {
  std::size_t host_available = 0;  // 0 = unknown
  bool device_is_host = true;
  std::size_t device_available = 0;  // free device memory (CUDA); 0 = unknown or the host
  std::size_t disk_available = 0;    // free bytes in storage.disk_dir (0 = unknown or unused)
  /// host_available is this process's address-space limit (ulimit -v), not the node's memory:
  /// each rank has its own.
  bool per_process = false;
};
MachineMemory machine_memory(io::Config const& cfg);

/// Table of the estimates (MiB per component, totals per place, and what is available).
std::string memory_table(std::vector<MemoryEstimate> const& phases, MachineMemory const& mm, int local_ranks);

/// Throws ksweep::Error with the table when a phase does not fit (host memory, with
/// `local_ranks` ranks on the node; disk space for disk storage).
void check_memory(std::vector<MemoryEstimate> const& phases, MachineMemory const& mm, int local_ranks);

/// For a run that does not fit (check_memory threw): the smallest split of the model (fewest
/// subdomains beyond `tried`, parallel.domains) whose inversion phase fits each rank with one
/// shot group (the batch over its ranks), as a line for the error message.
std::string smallest_split(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                           MachineMemory const& mm, core::DomainSplit const& tried);

}  // namespace ksweep::app
