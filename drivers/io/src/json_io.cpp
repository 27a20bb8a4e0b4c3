#include <ksweep/io/json_io.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/io/atomic_file.hpp>

#include <fstream>
#include <system_error>

namespace ksweep::io {

void write_json_atomic(std::filesystem::path const& path, nlohmann::json const& value) {
  std::string text;
  try {
    // Text that is not UTF-8 (a path from the environment) is written with U+FFFD in its place
    // rather than failing the write; the configuration's own strings are checked at load.
    text = value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } catch (nlohmann::json::exception const& e) {
    KSWEEP_REQUIRE(false, "cannot serialise JSON for " << path << ": " << e.what());
  }
  write_file_atomic(path, text);
}

nlohmann::json read_json(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "cannot open JSON file " << path << " (missing or unreadable)");
  try {
    return nlohmann::json::parse(in);
  } catch (nlohmann::json::exception const& e) {
    KSWEEP_REQUIRE(false, "JSON file " << path << " is not valid JSON: " << e.what());
  }
  return {};
}

}  // namespace ksweep::io
