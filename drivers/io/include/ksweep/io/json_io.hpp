#pragma once
/// \file json_io.hpp
/// JSON summary files.

#include <filesystem>

#include <nlohmann/json.hpp>

namespace ksweep::io {

/// Writes `value` pretty-printed (2-space indent) to `path + ".tmp"` and renames it to
/// `path`, so readers never see a partial file. Throws ksweep::Error.
void write_json_atomic(std::filesystem::path const& path, nlohmann::json const& value);

/// Reads and parses the JSON file at `path`. Throws ksweep::Error.
nlohmann::json read_json(std::filesystem::path const& path);

}  // namespace ksweep::io
