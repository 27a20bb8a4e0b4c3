// A text wavelet (wavelet.source): "time, amplitude" lines, resampled to the run's interval.
#include "fuzz_input.hpp"

#include <ksweep/io/wavelet.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const path = ksweep::fuzz::write_input(data, size, ".txt");
  return ksweep::fuzz::run([&] { (void)ksweep::io::read_wavelet(path, 0.002, 500, "wavelet.source"); });
}
