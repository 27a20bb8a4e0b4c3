#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>

#include <ksweep/base/error.hpp>

#include <openssl/evp.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace ksweep::io {

namespace {
std::atomic<long> g_writes{0};
}  // namespace

std::string describe_errno(int err) {
  std::string s = std::strerror(err);
  switch (err) {
    case ENOSPC:
      return s + " (ENOSPC: no space left on the device: free space or choose another folder)";
    case EFBIG:
      return s + " (EFBIG: the file-size limit was reached, see `ulimit -f`: no space left for this file)";
#ifdef EDQUOT
    case EDQUOT:
      return s + " (EDQUOT: the disk quota is exhausted: no space left for this user)";
#endif
    default:
      return s;
  }
}

void check_injected_write_fault(std::filesystem::path const& path) {
  char const* e = std::getenv("KSWEEP_FAULT_WRITES");
  if (e == nullptr || *e == '\0') return;
  long const allowed = std::strtol(e, nullptr, 10);
  if (g_writes.fetch_add(1) >= allowed)
    throw Error("cannot write " + shown_path(path) + ": " + describe_errno(ENOSPC) +
                " [injected by KSWEEP_FAULT_WRITES]");
}

void write_file_atomic(std::filesystem::path const& path, std::string_view bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  KSWEEP_REQUIRE(fd >= 0, "cannot create " << shown_path(tmp) << ": " << describe_errno(errno));
  auto fail = [&](std::string const& what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(what + " " + shown_path(tmp) + ": " + describe_errno(err));
  };
  try {
    check_injected_write_fault(path);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t const n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + std::to_string(bytes.size()) + " bytes to", errno);
    }
    if (n == 0) fail("cannot write to", ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("cannot flush", errno);
  int const rc = ::close(fd);
  fd = -1;
  if (rc != 0) fail("cannot close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int const err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + shown_path(tmp) + " to " + shown_path(path) + ": " + describe_errno(err));
  }
  auto parent = path.parent_path();
  if (parent.empty()) parent = ".";
  int const dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Sha256::Sha256() : m_ctx(EVP_MD_CTX_new()) {
  KSWEEP_REQUIRE(m_ctx != nullptr && EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(m_ctx), EVP_sha256(), nullptr) == 1,
                 "OpenSSL: cannot start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_ctx)); }

void Sha256::update(void const* data, std::size_t n) {
  KSWEEP_REQUIRE(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(m_ctx), data, n) == 1, "OpenSSL: SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  KSWEEP_REQUIRE(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(m_ctx), md, &len) == 1, "OpenSSL: SHA-256 final failed");
  static char const digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += digits[md[i] >> 4];
    s += digits[md[i] & 15];
  }
  return s;
}

std::string sha256_hex(void const* data, std::size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.hex();
}

}  // namespace ksweep::io
