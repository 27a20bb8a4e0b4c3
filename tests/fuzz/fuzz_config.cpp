// The TOML configuration: read, validated and written back as JSON (summary.json's form).
#include "fuzz_input.hpp"

#include <ksweep/io/config.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  std::string const text(reinterpret_cast<char const*>(data), size);
  return ksweep::fuzz::run([&] {
    auto const cfg = ksweep::io::config_from_string(text, {});
    (void)ksweep::io::config_to_json(cfg).dump();
  });
}
