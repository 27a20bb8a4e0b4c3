#include <ksweep/io/json_io.hpp>

#include <ksweep/core/error.hpp>

#include <fstream>
#include <system_error>

namespace ksweep::io {

void write_json_atomic(std::filesystem::path const& path, nlohmann::json const& value) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  std::string text;
  try {
    text = value.dump(2) + "\n";
  } catch (nlohmann::json::exception const& e) {
    KSWEEP_REQUIRE(false, "cannot serialise JSON for " << path << ": " << e.what());
  }
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KSWEEP_REQUIRE(out.good(), "cannot create " << tmp
                                                << " (does the directory exist and is it "
                                                   "writable?)");
    out << text;
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      KSWEEP_REQUIRE(false, "cannot write " << text.size() << " bytes to " << tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    KSWEEP_REQUIRE(false, "cannot rename " << tmp << " to " << path << ": " << ec.message());
  }
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
