// SEG-Y: shot gathers (fwi.observed, survey.file), their headers and samples, and a wavelet's
// first trace.
#include "fuzz_input.hpp"

#include <ksweep/io/segy.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const path = ksweep::fuzz::write_input(data, size, ".segy");
  return ksweep::fuzz::run([&] {
    for (int ny : {0, 1}) {
      try {
        (void)ksweep::io::read_records_segy(path, 10.0, ny, true, ksweep::io::Position{990.0, 990.0, 990.0});
      } catch (ksweep::Error const&) {
      }
    }
    double dt = 0;
    (void)ksweep::io::read_segy_trace(path, dt, "wavelet.source");
  });
}
