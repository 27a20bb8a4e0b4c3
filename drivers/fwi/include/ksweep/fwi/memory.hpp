#pragma once
/// \file memory.hpp
/// The memory a run will need, per component and place, from the sizes of its problem and its
/// options, before anything is allocated (the padded grid's layout and the sizes of what the
/// propagator, the gradient engine, the store and the optimizer allocate on it: core/sizes.hpp).
/// The program checks it against the machine before reading the model's values; a library or
/// Python caller asks it before building an Inversion or a Modeling. After the allocation,
/// Inversion::memory() reports what was allocated.

#include <ksweep/core/domain.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/physics.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ksweep::fwi {

/// Where a component lives.
enum class Place { device, host, disk };

struct MemoryItem {
  std::string what;
  Place place;
  std::size_t bytes;
};

/// The components of one phase of a run (per rank).
struct MemoryEstimate {
  std::string phase;
  std::vector<MemoryItem> items;
  std::size_t total(Place p) const;
};

/// What the memory of a run depends on, known before any model value is read: the model grid
/// and its absorbing layer, the order, the physics, the record length and the survey's size.
struct RunShape {
  core::ModelGrid grid;
  core::PmlConfig pml;
  int order = 4;
  Physics physics = Physics::acoustic;
  int nt = 0;
  int n_shots = 0;
  int n_receivers = 0;  ///< per shot (the most of any shot)
};

/// The shape of `problem`.
RunShape run_shape(Problem const& problem);

/// One rank of an inversion with `options` (its storage, optimizer and split of the model,
/// options.domains) on `ranks` ranks: they form ranks / domains shot groups, each rank
/// propagating its share of a batch (Adam's options.batch, or every shot for L-BFGS) per
/// launch. With a split model, the propagation's part is that of the largest subdomain and the
/// optimizer's (models, moments, summed images) the whole model's.
MemoryEstimate estimate_inversion(RunShape const& shape, Options const& options, int ranks = 1);

/// The forward modelling of every shot, `batch` shots per launch, in float or double (`fp64`),
/// on the largest subdomain of `split`.
MemoryEstimate estimate_modeling(RunShape const& shape, bool fp64, int batch, core::DomainSplit const& split = {});

/// Imaging (RTM, and LSRTM with `lsrtm_iterations` > 0) of every shot on `ranks` ranks, per
/// rank: the shots over ranks / split.count() shot groups, `batch` shots per launch (0: a group's
/// shots at once), the gradient's store `storage`, in float or double (`fp64`), on the largest
/// subdomain of `split`.
MemoryEstimate estimate_imaging(RunShape const& shape, storage::StorageConfig const& storage, bool fp64, int batch,
                                int lsrtm_iterations, int ranks = 1, core::DomainSplit const& split = {});

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
/// `disk_dir`: where a disk store's saved steps go ("" for the temporary folder), when `disk`.
MachineMemory machine_memory(bool disk = false, std::string const& disk_dir = "");

/// Table of the estimates (MiB per component, totals per place, and what is available).
std::string memory_table(std::vector<MemoryEstimate> const& phases, MachineMemory const& mm, int local_ranks);

/// Throws ksweep::Error with the table when a phase does not fit (host memory, with
/// `local_ranks` ranks on the node; disk space for disk storage).
void check_memory(std::vector<MemoryEstimate> const& phases, MachineMemory const& mm, int local_ranks);

/// "device", "host" or "disk".
std::string to_string(Place place);

}  // namespace ksweep::fwi
