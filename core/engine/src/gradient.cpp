#include <ksweep/core/gradient.hpp>

#include <iomanip>
#include <sstream>

namespace ksweep::core {

std::string MemoryReport::to_string() const {
  std::ostringstream os;
  auto mib = [](std::size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  os << std::fixed << std::setprecision(1);
  os << "memory (" << strategy << ", " << location << ", " << dtype << "):\n"
     << "  boundary / saved steps (" << location << "): " << mib(boundary_bytes) << " MiB\n"
     << "  transfer staging:            " << mib(staging_bytes) << " MiB\n"
     << "  layer terms (every step):    " << mib(layer_term_bytes) << " MiB\n"
     << "  wavefields and CPML fields:  " << mib(wavefield_bytes) << " MiB\n"
     << "  seed snapshots (last two):   " << mib(seed_bytes) << " MiB\n"
     << "  gradient and illumination:   " << mib(image_bytes) << " MiB\n"
     << "  observed batch:              " << mib(observed_bytes) << " MiB\n"
     << "  synthetic records:           " << mib(synthetic_bytes) << " MiB\n"
     << "  measured peak:               " << mib(peak_device_bytes) << " MiB";
  return os.str();
}

}  // namespace ksweep::core
