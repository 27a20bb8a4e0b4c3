#pragma once
/// \file memory_report.hpp
/// What a gradient computation holds, component by component.

#include <cstddef>
#include <string>

namespace ksweep::core {

/// Bytes of each component of a gradient computation.
struct MemoryReport {
  std::string strategy, location, dtype;
  std::size_t boundary_bytes = 0;     ///< saved steps, at `location`
  std::size_t staging_bytes = 0;      ///< device staging for host/disk transfers
  std::size_t layer_term_bytes = 0;   ///< the layer terms of the model cells next to the layer, every step (device)
  std::size_t wavefield_bytes = 0;    ///< working wavefields and CPML memories (forward + adjoint)
  std::size_t seed_bytes = 0;         ///< the last two forward levels (kept in the working fields)
  std::size_t image_bytes = 0;        ///< gradient and illumination accumulators
  std::size_t observed_bytes = 0;     ///< observed batch
  std::size_t synthetic_bytes = 0;    ///< synthetic records
  std::size_t peak_device_bytes = 0;  ///< measured (host backends: peak resident set of the process)
  std::string to_string() const;
};

}  // namespace ksweep::core
