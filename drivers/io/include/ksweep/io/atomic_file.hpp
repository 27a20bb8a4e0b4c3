#pragma once
/// \file atomic_file.hpp
/// Crash-safe file writes shared by every writer of ksweep: the bytes go to `path + ".tmp"`,
/// are flushed to disk, and the temporary file is renamed over `path`; on any failure the
/// temporary file is removed and `path` keeps its previous contents. Errors name the file and
/// the cause (a full disk and a file-size limit are named as such).

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace ksweep::io {

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync of the folder).
/// Throws ksweep::Error naming the file and the cause.
void write_file_atomic(std::filesystem::path const& path, std::string_view bytes);

/// strerror(err) followed by what it means for ksweep's outputs, e.g. for ENOSPC
/// "No space left on device (ENOSPC: the disk is full)".
std::string describe_errno(int err);

/// Fault injection for tests: when the environment variable KSWEEP_FAULT_WRITES = N is set,
/// the (N+1)-th and every later output file fails as on a full disk. Throws ksweep::Error
/// (naming `path` and ENOSPC) when this write must fail; called by every output writer.
void check_injected_write_fault(std::filesystem::path const& path);

/// SHA-256 of `n` bytes as 64 lowercase hexadecimal digits.
std::string sha256_hex(void const* data, std::size_t n);

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256 const&) = delete;
  Sha256& operator=(Sha256 const&) = delete;
  void update(void const* data, std::size_t n);
  /// 64 lowercase hexadecimal digits; the object cannot be updated afterwards.
  std::string hex();

 private:
  void* m_ctx;
};

}  // namespace ksweep::io
