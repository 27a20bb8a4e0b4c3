#include <ksweep/storage/codec.hpp>
#include <ksweep/storage/step_store.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include <csignal>
#include <cstdlib>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ksweep::storage {

StorageConfig make_storage_config(std::string const& strategy, std::string const& location, std::string const& dtype,
                                  int transfer_interval, std::string const& disk_dir, bool pinned) {
  StorageConfig c;
  c.strategy = parse_strategy(strategy);
  c.location = parse_location(location);
  c.dtype = parse_dtype(dtype);
  KSWEEP_REQUIRE(transfer_interval >= 1, "storage.transfer_interval = " << transfer_interval << " must be >= 1");
  c.transfer_interval = transfer_interval;
  c.disk_dir = disk_dir;
  c.pinned = pinned;
  if (c.location == Location::disk && !disk_dir.empty()) {
    std::error_code ec;
    KSWEEP_REQUIRE(std::filesystem::is_directory(disk_dir, ec),
                   "storage.disk_dir = \"" << shown(disk_dir) << "\" does not exist or is not a directory");
    KSWEEP_REQUIRE(::access(disk_dir.c_str(), W_OK | X_OK) == 0,
                   "storage.disk_dir = \"" << shown(disk_dir) << "\" is not writable: " << std::strerror(errno));
    // Only making a folder there tells (read-only mounts, special file systems, quotas): one is
    // made and removed at once.
    std::string probe = (std::filesystem::path(disk_dir) / "ksweep-probe-XXXXXX").string();
    KSWEEP_REQUIRE(
        ::mkdtemp(probe.data()) != nullptr,
        "storage.disk_dir = \"" << shown(disk_dir) << "\": cannot create a folder there: " << std::strerror(errno));
    ::rmdir(probe.c_str());
  }
  return c;
}

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h = buf;
  for (auto& c : h)
    if (c == '/' || c == '-') c = '_';  // the name's separators stay unambiguous
  return h;
}

/// The process id of a scratch folder named "ksweep-PID-COUNTER-RANDOM-HOST" made on this
/// host; 0 for any other name.
long scratch_owner(std::string const& name, std::string const& host) {
  if (name.rfind("ksweep-", 0) != 0) return 0;
  std::size_t pos = 7;
  long pid = 0;
  for (int field = 0; field < 3; ++field) {
    std::size_t const end = name.find('-', pos);
    if (end == std::string::npos || end == pos) return 0;
    for (std::size_t i = pos; i < end; ++i)
      if (name[i] < '0' || name[i] > '9') return 0;
    if (field == 0) pid = std::stol(name.substr(pos, end - pos));
    pos = end + 1;
  }
  return name.compare(pos, std::string::npos, host) == 0 ? pid : 0;
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_scratch(std::filesystem::path const& dir) {
  std::vector<std::filesystem::path> removed;
  std::string const host = host_name();
  std::error_code ec;
  for (auto const& e : std::filesystem::directory_iterator(dir, ec)) {
    long const pid = scratch_owner(e.path().filename().string(), host);
    if (pid <= 0 || pid == static_cast<long>(::getpid()) || !e.is_directory(ec)) continue;
    // Its process must be gone (no process with that id on this host) ...
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    // ... and nothing may hold the lock its owner takes on the file (a recycled id).
    auto const file = e.path() / "boundary.bin";
    int const fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      bool const free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
      if (!free) {
        ::close(fd);
        continue;
      }
      std::filesystem::remove_all(e.path(), ec);
      ::close(fd);
    } else {
      std::filesystem::remove_all(e.path(), ec);
    }
    if (!ec) removed.push_back(e.path());
  }
  return removed;
}

namespace impl {

namespace {
std::atomic<int> g_run_counter{0};
}

DiskFile::DiskFile(std::string const& parent, std::size_t capacity_bytes) {
  std::error_code ec;
  std::filesystem::path const dir =
      parent.empty() ? std::filesystem::temp_directory_path(ec) : std::filesystem::path(parent);
  KSWEEP_REQUIRE(!ec, "cannot find a temporary directory for disk storage: " << ec.message());
  KSWEEP_REQUIRE(std::filesystem::is_directory(dir, ec),
                 "storage.disk_dir = \"" << dir.string() << "\" does not exist or is not a directory");
  remove_stale_scratch(dir);  // of processes that ended without removing theirs (SIGKILL)
  std::random_device rd;
  std::string const name = "ksweep-" + std::to_string(::getpid()) + "-" + std::to_string(g_run_counter++) + "-" +
                           std::to_string(rd() % 1000000) + "-" + host_name();
  m_folder = dir / name;
  KSWEEP_REQUIRE(::mkdir(m_folder.c_str(), 0700) == 0, "cannot create the disk storage folder "
                                                           << m_folder.string() << " in storage.disk_dir = \""
                                                           << dir.string() << "\": " << std::strerror(errno));
  m_path = m_folder / "boundary.bin";
  m_fd = ::open(m_path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  // Held until the process ends: remove_stale_scratch never takes a live run's folder.
  if (m_fd >= 0) (void)::flock(m_fd, LOCK_EX | LOCK_NB);
  if (m_fd < 0) {
    int const err = errno;
    ::rmdir(m_folder.c_str());
    KSWEEP_REQUIRE(false, "cannot create " << m_path.string() << ": " << std::strerror(err));
  }
  (void)capacity_bytes;
}

DiskFile::~DiskFile() {
  if (m_fd >= 0) ::close(m_fd);
  std::error_code ec;
  std::filesystem::remove_all(m_folder, ec);
}

void DiskFile::write(void const* data, std::size_t bytes, std::size_t offset) {
  auto const* p = static_cast<char const*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    if (m_written >= m_fail_after) {
      throw Error("disk storage: writing " + m_path.string() + " failed after " + std::to_string(m_written) +
                  " bytes: " + std::strerror(ENOSPC));
    }
    std::size_t const want = std::min(bytes - done, m_fail_after - m_written);
    ssize_t const n = ::pwrite(m_fd, p + done, want, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("disk storage: writing " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                  " of " + m_path.string() + " failed: " + std::strerror(errno));
    }
    if (n == 0) throw Error("disk storage: writing " + m_path.string() + " made no progress");
    done += static_cast<std::size_t>(n);
    m_written += static_cast<std::size_t>(n);
  }
}

void DiskFile::read(void* data, std::size_t bytes, std::size_t offset) const {
  auto* p = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    ssize_t const n = ::pread(m_fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("disk storage: reading " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                  " of " + m_path.string() + " failed: " + std::strerror(errno));
    }
    if (n == 0)
      throw Error("disk storage: " + m_path.string() + " ended at offset " + std::to_string(offset + done) +
                  " (expected " + std::to_string(offset + bytes) + " bytes): the file was truncated");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace impl
}  // namespace ksweep::storage
