#pragma once
/// What every parser fuzz target shares: the input as a file (the parsers read files, as users
/// give them), and the one outcome allowed besides success: ksweep::Error, whose message names
/// the input. Any other exception escaping a parser (toml++'s, the standard library's, HDF5's)
/// is a finding: it aborts, and the fuzzer keeps the input.

#include <ksweep/base/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace ksweep::fuzz {

/// A file of this process's own (the fuzzers may run in parallel jobs), named with `extension`.
inline std::filesystem::path scratch(char const* extension) {
  char const* dir = std::getenv("TMPDIR");
  return std::filesystem::path(dir != nullptr && *dir != '\0' ? dir : "/tmp") /
         ("ksweep_fuzz_" + std::to_string(::getpid()) + extension);
}

inline std::filesystem::path write_input(std::uint8_t const* data, std::size_t size, char const* extension) {
  auto const path = scratch(extension);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<char const*>(data), static_cast<std::streamsize>(size));
  return path;
}

/// Runs `parse`; ksweep::Error (a refusal naming the input) is a pass, and so is success.
template <class F>
int run(F&& parse) {
  try {
    parse();
  } catch (ksweep::Error const&) {
  } catch (std::bad_alloc const&) {
    std::fprintf(stderr, "finding: an allocation failed (an input's sizes were not checked)\n");
    std::abort();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "finding: an exception other than ksweep::Error escaped: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace ksweep::fuzz
