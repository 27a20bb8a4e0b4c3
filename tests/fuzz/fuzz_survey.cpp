// A CSV survey (survey.file), in 2D and 3D, inside a model of 100 x 100 (x 100) cells of 10 m.
#include "fuzz_input.hpp"

#include <ksweep/io/survey.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  auto const path = ksweep::fuzz::write_input(data, size, ".csv");
  return ksweep::fuzz::run([&] {
    for (bool three : {false, true}) {
      try {
        (void)ksweep::io::read_survey(path, 10.0, three, ksweep::io::Position{990.0, 990.0, three ? 990.0 : 0.0});
      } catch (ksweep::Error const&) {
      }
    }
  });
}
