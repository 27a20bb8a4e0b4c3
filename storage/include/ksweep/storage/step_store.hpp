#pragma once
/// \file step_store.hpp
/// Where the per-step saved values live: on the device, in pinned host memory, or on disk.
///
/// Steps are written in increasing order during the forward pass and read in decreasing order
/// during the backward pass. Host and disk stores move `transfer_interval` steps at a time
/// between two device staging chunks and their destination, on a background thread and (on
/// devices) a second execution space instance, so the transfer of one chunk overlaps the
/// computation of the next.

#include <ksweep/base/error.hpp>
#include <ksweep/storage/codec.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

namespace ksweep::storage {

enum class Location { device, host, disk };
Location parse_location(std::string const& name);
std::string to_string(Location l);

/// How and where the forward wavefield is kept for the gradient.
struct StorageConfig {
  std::string strategy = "boundary";  ///< "full" or "boundary"
  Location location = Location::device;
  Dtype dtype = Dtype::fp32;
  int transfer_interval = 64;  ///< steps per host/disk transfer
  std::string disk_dir;        ///< parent folder of the per-run folder (empty: system temp)
  bool pinned = true;          ///< page-locked host memory for host storage (CUDA)
};

/// Parses and checks a storage configuration (errors name the value and the allowed ones).
StorageConfig make_storage_config(std::string const& strategy, std::string const& location, std::string const& dtype,
                                  int transfer_interval, std::string const& disk_dir, bool pinned);

namespace impl {

/// A per-run folder and file for the disk store; removes both when destroyed.
class DiskFile {
 public:
  DiskFile(std::string const& parent, std::size_t capacity_bytes);
  ~DiskFile();
  DiskFile(DiskFile const&) = delete;
  DiskFile& operator=(DiskFile const&) = delete;
  void write(void const* data, std::size_t bytes, std::size_t offset);
  void read(void* data, std::size_t bytes, std::size_t offset) const;
  std::filesystem::path const& folder() const { return m_folder; }
  std::filesystem::path const& path() const { return m_path; }
  /// Test hook: writes past this many bytes in total fail as a full disk would.
  void fail_after(std::size_t bytes) { m_fail_after = bytes; }

 private:
  std::filesystem::path m_folder, m_path;
  int m_fd = -1;
  std::size_t m_written = 0;
  std::size_t m_fail_after = static_cast<std::size_t>(-1);
};

}  // namespace impl

/// The host memory space for host storage: page-locked where the backend has one.
template <class MemorySpace>
struct PinnedSpace {
  using type = Kokkos::HostSpace;
};
#if defined(KOKKOS_ENABLE_CUDA)
template <>
struct PinnedSpace<Kokkos::CudaSpace> {
  using type = Kokkos::CudaHostPinnedSpace;
};
#endif

namespace impl {
/// The execution space instance that carries host/disk transfers: on devices a second
/// instance (its own stream), so that copies overlap the kernels of the compute instance; on
/// host backends the copies are plain memcpy on the transfer thread.
template <class ExecSpace>
ExecSpace transfer_instance(ExecSpace const& space) {
#if KOKKOS_VERSION >= 40000
  if constexpr (!Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible)
    return Kokkos::Experimental::partition_space(space, 1)[0];
#endif
  return space;
}
}  // namespace impl

/// Encoded storage of `n_steps` steps of `values_per_step` values each.
template <class Real, class ExecSpace>
class StepStore {
 public:
  using memory_space = typename ExecSpace::memory_space;
  using bytes_view = Kokkos::View<std::uint8_t*, memory_space>;
  using const_bytes_view = Kokkos::View<std::uint8_t const*, memory_space>;
  using host_bytes_view = Kokkos::View<std::uint8_t*, Kokkos::HostSpace>;
  using pinned_bytes_view = Kokkos::View<std::uint8_t*, typename PinnedSpace<memory_space>::type>;
  static constexpr bool device_is_host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;

  StepStore(ExecSpace const& space, StorageConfig const& cfg, std::size_t values_per_step, int n_steps)
      : m_space(space), m_cfg(cfg), m_n(values_per_step), m_steps(n_steps),
        m_step_bytes(encoded_bytes(cfg.dtype, values_per_step, sizeof(Real))) {
    KSWEEP_REQUIRE(n_steps >= 1, "ksweep::storage::StepStore: n_steps = " << n_steps << " must be >= 1");
    KSWEEP_REQUIRE(cfg.transfer_interval >= 1,
                   "storage.transfer_interval = " << cfg.transfer_interval << " must be >= 1");
    m_bad = Kokkos::View<int, memory_space>(Kokkos::view_alloc(m_space, std::string("ksweep::storage::bad")));
    std::size_t const total = m_step_bytes * static_cast<std::size_t>(n_steps);
    if (cfg.location == Location::device) {
      m_all = bytes_view(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string("ksweep::storage::device")), total);
      return;
    }
    m_transfer = impl::transfer_instance(m_space);
    m_interval = std::min(cfg.transfer_interval, n_steps);
    m_chunk_bytes = m_step_bytes * static_cast<std::size_t>(m_interval);
    for (auto& c : m_stage)
      c = bytes_view(Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing, std::string("ksweep::storage::stage")),
                     m_chunk_bytes);
    if (cfg.location == Location::host) {
      if (cfg.pinned) {
        m_pinned = pinned_bytes_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("ksweep::storage::host")), total);
      } else {
        m_host = host_bytes_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("ksweep::storage::host")), total);
      }
    } else {
      m_disk = std::make_unique<impl::DiskFile>(cfg.disk_dir, total);
      if constexpr (!device_is_host) {
        for (auto& b : m_bounce)
          b = pinned_bytes_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("ksweep::storage::bounce")),
                                m_chunk_bytes);
      }
    }
  }

  ~StepStore() {
    for (auto& f : m_pending)
      if (f.valid()) f.wait();
  }
  StepStore(StepStore const&) = delete;
  StepStore& operator=(StepStore const&) = delete;

  std::size_t step_bytes() const { return m_step_bytes; }
  std::size_t values_per_step() const { return m_n; }
  /// Bytes held at the storage location (device, host or disk).
  std::size_t stored_bytes() const { return m_step_bytes * static_cast<std::size_t>(m_steps); }
  /// Device bytes of the staging chunks (zero for device storage).
  std::size_t staging_bytes() const { return m_location_staging() ; }
  Location location() const { return m_cfg.location; }
  impl::DiskFile* disk() { return m_disk.get(); }

  /// Encodes and saves step `step` (steps in increasing order).
  void put(int step, Kokkos::View<Real const*, memory_space> values) {
    check_size(values.extent(0));
    put_from(step, ViewValues<Real const, memory_space>{values});
  }

  /// Encodes values_per_step() values read through `source` (a codec value source, such as a
  /// ring of wavefield cells) and saves them as step `step`: one launch.
  template <class Source>
  void put_from(int step, Source const& source) {
    if (m_cfg.location == Location::device) {
      encode_from<ExecSpace, Real>(m_space, m_cfg.dtype, source, m_n, slot(m_all, step), m_bad);
      return;
    }
    int const c = step / m_interval, j = c % 2;
    if (step % m_interval == 0) wait(j);  // the staging chunk is free again
    encode_from<ExecSpace, Real>(m_space, m_cfg.dtype, source, m_n,
                                 bytes_view(Kokkos::subview(m_stage[j], range((step - c * m_interval) * m_step_bytes))),
                                 m_bad);
    if (step % m_interval == m_interval - 1 || step == m_steps - 1) {
      m_space.fence();  // the chunk is encoded; the transfer runs on its own instance and thread
      check_finite();
      std::size_t const bytes = static_cast<std::size_t>(std::min(m_interval, m_steps - c * m_interval)) * m_step_bytes;
      std::size_t const offset = static_cast<std::size_t>(c) * m_chunk_bytes;
      m_pending[j] = std::async(std::launch::async, [this, j, bytes, offset] { store_chunk(j, bytes, offset); });
    }
  }

  /// Waits until every saved step is at its location; throws on a failed transfer.
  void finish_writes() {
    if (m_cfg.location == Location::device) {
      m_space.fence();
      check_finite();
      return;
    }
    wait(0);
    wait(1);
    m_loaded = -1;
  }

  /// Decodes step `step` into `values` (steps in decreasing order).
  void get(int step, Kokkos::View<Real*, memory_space> values) {
    check_size(values.extent(0));
    Kokkos::parallel_for("ksweep::storage::decode", Kokkos::RangePolicy<ExecSpace>(m_space, 0, m_n),
                         decoder(fetch(step), ViewValues<Real, memory_space>{values}));
  }

  /// The encoded bytes of step `step` in device memory (steps in decreasing order), valid for
  /// kernels launched on the store's execution space before the next fetch(). Host and disk
  /// stores load the chunk if needed and start loading the chunk before it.
  const_bytes_view fetch(int step) {
    if (m_cfg.location == Location::device) return slot(m_all, step);
    int const c = step / m_interval, j = c % 2;
    if (m_loaded != c) {
      if (!m_pending[j].valid()) {
        m_space.fence();
        load_chunk(c, j);
      } else {
        wait(j);
      }
      m_loaded = c;
      if (c > 0) {
        int const jn = (c - 1) % 2;
        m_space.fence();  // the decode of the previous chunk from that slot is done
        wait(jn);
        m_pending[jn] = std::async(std::launch::async, [this, c, jn] { load_chunk(c - 1, jn); });
      }
    }
    return Kokkos::subview(m_stage[j], range((step - c * m_interval) * m_step_bytes));
  }

  /// A per-value functor (index 0 .. values_per_step()-1) that decodes `bytes` from fetch()
  /// through `sink` (a codec value sink), for fusing into a caller's launch.
  template <class Sink>
  DecodeValues<Real, memory_space, Sink> decoder(const_bytes_view const& bytes, Sink const& sink) const {
    return DecodeValues<Real, memory_space, Sink>{bytes, sink, m_n, m_cfg.dtype};
  }

 private:
  std::size_t m_location_staging() const {
    return m_cfg.location == Location::device ? 0 : 2 * m_chunk_bytes;
  }
  Kokkos::pair<std::size_t, std::size_t> range(std::size_t offset) const { return {offset, offset + m_step_bytes}; }
  bytes_view slot(bytes_view const& all, int step) const {
    return Kokkos::subview(all, range(static_cast<std::size_t>(step) * m_step_bytes));
  }
  void check_size(std::size_t n) const {
    KSWEEP_REQUIRE(n == m_n, "ksweep::storage::StepStore: " << n << " values given, the store holds " << m_n << " per step");
  }
  void check_finite() {
    int bad = 0;
    // Through the compute instance: a plain deep_copy would fence every instance, the
    // transfer instance's copies too.
    Kokkos::deep_copy(m_space, Kokkos::View<int, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&bad), m_bad);
    m_space.fence();
    KSWEEP_REQUIRE(bad == 0, "the saved wavefield contains NaN or infinity: the forward run diverged "
                             "(check the CFL condition and the velocity model)");
  }
  void wait(int j) {
    if (m_pending[j].valid()) m_pending[j].get();  // rethrows a failed transfer
  }

  // Runs on the transfer thread: staging chunk j (bytes) -> destination at offset.
  void store_chunk(int j, std::size_t bytes, std::size_t offset) {
    if (m_cfg.location == Location::host) {
      move_host(m_stage[j], offset, bytes, true);
    } else if constexpr (device_is_host) {
      m_disk->write(m_stage[j].data(), bytes, offset);
    } else {
      Kokkos::deep_copy(m_transfer, Kokkos::subview(m_bounce[j], Kokkos::make_pair(std::size_t(0), bytes)),
                        Kokkos::subview(m_stage[j], Kokkos::make_pair(std::size_t(0), bytes)));
      m_transfer.fence();
      m_disk->write(m_bounce[j].data(), bytes, offset);
    }
  }
  // Chunk c -> staging chunk j.
  void load_chunk(int c, int j) {
    std::size_t const bytes = static_cast<std::size_t>(std::min(m_interval, m_steps - c * m_interval)) * m_step_bytes;
    std::size_t const offset = static_cast<std::size_t>(c) * m_chunk_bytes;
    if (m_cfg.location == Location::host) {
      move_host(m_stage[j], offset, bytes, false);
    } else if constexpr (device_is_host) {
      m_disk->read(m_stage[j].data(), bytes, offset);
    } else {
      m_disk->read(m_bounce[j].data(), bytes, offset);
      Kokkos::deep_copy(m_transfer, Kokkos::subview(m_stage[j], Kokkos::make_pair(std::size_t(0), bytes)),
                        Kokkos::subview(m_bounce[j], Kokkos::make_pair(std::size_t(0), bytes)));
      m_transfer.fence();
    }
  }
  // Byte copy between a staging chunk and host memory (a plain memcpy on host backends).
  template <class Dst, class Src>
  void copy_bytes(Dst const& dst, Src const& src, std::size_t bytes) const {
    if constexpr (device_is_host) {
      std::memcpy(dst.data(), src.data(), bytes);
    } else {
      Kokkos::deep_copy(m_transfer, dst, src);
      m_transfer.fence();
    }
  }
  // Staging chunk <-> host store at offset (to_host: staging -> host).
  void move_host(bytes_view const& stage, std::size_t offset, std::size_t bytes, bool to_host) {
    auto const st = Kokkos::subview(stage, Kokkos::make_pair(std::size_t(0), bytes));
    auto run = [&](auto const& host) {
      auto const h = Kokkos::subview(host, Kokkos::make_pair(offset, offset + bytes));
      if (to_host) copy_bytes(h, st, bytes);
      else copy_bytes(st, h, bytes);
    };
    if (m_cfg.pinned) run(m_pinned);
    else run(m_host);
  }

  ExecSpace m_space;
  ExecSpace m_transfer;  // host/disk transfers (see impl::transfer_instance)
  StorageConfig m_cfg;
  std::size_t m_n;
  int m_steps;
  std::size_t m_step_bytes;
  int m_interval = 1;
  std::size_t m_chunk_bytes = 0;
  int m_loaded = -1;
  Kokkos::View<int, memory_space> m_bad;
  bytes_view m_all;
  bytes_view m_stage[2];
  pinned_bytes_view m_pinned, m_bounce[2];
  host_bytes_view m_host;
  std::unique_ptr<impl::DiskFile> m_disk;
  std::future<void> m_pending[2];
};

}  // namespace ksweep::storage
