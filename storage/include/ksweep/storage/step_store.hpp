#pragma once
/// \file step_store.hpp
/// Where the per-step saved values live: on the device, in pinned host memory, or on disk.
///
/// Steps are written in increasing order during the forward pass and read in decreasing order
/// during the backward pass. Host and disk stores move `transfer_interval` steps at a time
/// between two device staging chunks and their destination, on a background thread and (on
/// devices) a second execution space instance, so the transfer of one chunk overlaps the
/// computation of the next.
///
/// Each location is a class behind impl::Steps (impl::DeviceSteps, impl::HostSteps with
/// page-locked or plain host memory, impl::DiskSteps), chosen once when a StepStore is built;
/// the dtype is turned into a codec type at each encode and decode launch (dispatch_dtype).

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/storage/codec.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

namespace ksweep::storage {

/// The storage.location values, in the order of names::location.
enum class Location { device, host, disk };
inline Location parse_location(std::string const& name) { return names::parse<Location>(names::location, name); }
inline std::string to_string(Location l) { return names::to_string(names::location, l); }

/// The storage.strategy values, in the order of names::strategy: what each step saves (see
/// ksweep/core/gradient.hpp).
enum class Strategy { full, boundary };
inline Strategy parse_strategy(std::string const& name) { return names::parse<Strategy>(names::strategy, name); }
inline std::string to_string(Strategy s) { return names::to_string(names::strategy, s); }

/// How and where the forward wavefield is kept for the gradient.
struct StorageConfig {
  Strategy strategy = Strategy::boundary;
  Location location = Location::device;
  Dtype dtype = Dtype::fp32;
  int transfer_interval = 64;  ///< steps per host/disk transfer
  std::string disk_dir;        ///< parent folder of the per-run folder (empty: system temp)
  bool pinned = true;          ///< page-locked host memory for host storage (CUDA)
  /// The gradient takes the chain rule of the absorbing layer's copy of the model's edge cells
  /// (core::GradientEngine::set_layer_chain): exact at the edge cells, at the cost of the layer's
  /// cells x shots x steps values of the compute precision on the device.
  bool layer_chain = false;
};

/// Parses and checks a storage configuration (errors name the value and the allowed ones).
StorageConfig make_storage_config(std::string const& strategy, std::string const& location, std::string const& dtype,
                                  int transfer_interval, std::string const& disk_dir, bool pinned);

/// Removes the disk-store scratch folders in `dir` left by processes of this host that ended
/// without removing them (killed): a folder is removed only when no process has its owner's
/// id and no process holds the lock its owner takes on its file. Returns what was removed.
std::vector<std::filesystem::path> remove_stale_scratch(std::filesystem::path const& dir);

namespace impl {

/// A per-run folder and file for the disk store (ksweep-PID-N-RANDOM-HOST), locked by its
/// owner; removes both when destroyed.
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

namespace impl {

/// What every location shares: the compute instance, the step size and the NaN flag of the
/// encoder.
template <class ExecSpace>
struct StepsCommon {
  using memory_space = typename ExecSpace::memory_space;
  ExecSpace m_space;
  std::size_t m_step_bytes;
  int m_steps;
  Kokkos::View<int, memory_space> m_bad;

  Kokkos::pair<std::size_t, std::size_t> range(std::size_t offset) const { return {offset, offset + m_step_bytes}; }
  /// Throws if an encoded step held NaN or infinity.
  void check_finite() const {
    int bad = 0;
    // Through the compute instance: a plain deep_copy would fence every instance, the
    // transfer instance's copies too.
    Kokkos::deep_copy(m_space, Kokkos::View<int, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&bad), m_bad);
    m_space.fence();
    KSWEEP_REQUIRE(bad == 0,
                   "the saved wavefield contains NaN or infinity: the forward run diverged "
                   "(check the CFL condition and the velocity model)");
  }
};

/// Where the encoded steps live: one class per storage location.
template <class ExecSpace>
class Steps {
 public:
  using memory_space = typename ExecSpace::memory_space;
  using bytes_view = Kokkos::View<std::uint8_t*, memory_space>;
  using const_bytes_view = Kokkos::View<std::uint8_t const*, memory_space>;

  explicit Steps(StepsCommon<ExecSpace> const& common) : m_common(common) {}
  virtual ~Steps() = default;
  Steps(Steps const&) = delete;
  Steps& operator=(Steps const&) = delete;

  /// Device bytes that step `step` (in increasing order) is encoded into.
  virtual bytes_view write_slot(int step) = 0;
  /// After the encode of step `step` was launched into write_slot(step).
  virtual void written(int step) = 0;
  /// Waits until every saved step is at its location; throws on a failed transfer or NaN.
  virtual void finish_writes() = 0;
  /// The encoded bytes of step `step` in device memory (see StepStore::fetch).
  virtual const_bytes_view fetch(int step) = 0;
  /// Ready for a new run of writes from step 0 (the allocations kept): no transfer pending.
  virtual void rewind() {}
  /// Device bytes of staging chunks.
  virtual std::size_t staging_bytes() const { return 0; }
  virtual DiskFile* disk() { return nullptr; }

 protected:
  StepsCommon<ExecSpace> m_common;
};

/// Device storage: every step in one device allocation.
template <class ExecSpace>
class DeviceSteps final : public Steps<ExecSpace> {
 public:
  using base = Steps<ExecSpace>;
  using typename base::bytes_view;
  using typename base::const_bytes_view;

  explicit DeviceSteps(StepsCommon<ExecSpace> const& common) : base(common) {
    auto const& c = this->m_common;
    m_all =
        bytes_view(Kokkos::view_alloc(c.m_space, Kokkos::WithoutInitializing, std::string("ksweep::storage::device")),
                   c.m_step_bytes * static_cast<std::size_t>(c.m_steps));
  }
  bytes_view write_slot(int step) override { return slot(step); }
  void written(int) override {}
  void finish_writes() override {
    this->m_common.m_space.fence();
    this->m_common.check_finite();
  }
  const_bytes_view fetch(int step) override { return slot(step); }

 private:
  bytes_view slot(int step) const {
    return Kokkos::subview(m_all, this->m_common.range(static_cast<std::size_t>(step) * this->m_common.m_step_bytes));
  }
  bytes_view m_all;
};

/// Host and disk storage: steps are encoded into one of two device staging chunks of
/// `transfer_interval` steps; a full chunk goes to its destination `Target` on a background
/// thread, and is read back (with the chunk before it started in the background) when the
/// backward pass reaches it. `Target` moves a chunk: store(stage, j, bytes, offset) and
/// load(stage, j, bytes, offset) on the transfer thread.
template <class ExecSpace, class Target>
class StagedSteps final : public Steps<ExecSpace> {
 public:
  using base = Steps<ExecSpace>;
  using typename base::bytes_view;
  using typename base::const_bytes_view;

  StagedSteps(StepsCommon<ExecSpace> const& common, int transfer_interval, std::string const& disk_dir)
      : base(common),
        m_interval(std::min(transfer_interval, common.m_steps)),
        m_chunk_bytes(common.m_step_bytes * static_cast<std::size_t>(m_interval)),
        m_target(common.m_space, common.m_step_bytes * static_cast<std::size_t>(common.m_steps), m_chunk_bytes,
                 disk_dir) {
    for (auto& c : m_stage)
      c = bytes_view(
          Kokkos::view_alloc(common.m_space, Kokkos::WithoutInitializing, std::string("ksweep::storage::stage")),
          m_chunk_bytes);
  }
  ~StagedSteps() override {
    for (auto& f : m_pending)
      if (f.valid()) f.wait();
  }

  bytes_view write_slot(int step) override {
    int const c = step / m_interval, j = c % 2;
    if (step % m_interval == 0) wait(j);  // the staging chunk is free again
    return Kokkos::subview(m_stage[j], this->m_common.range((step - c * m_interval) * this->m_common.m_step_bytes));
  }
  void written(int step) override {
    auto const& common = this->m_common;
    if (step % m_interval != m_interval - 1 && step != common.m_steps - 1) return;
    int const c = step / m_interval, j = c % 2;
    common.m_space.fence();  // the chunk is encoded; the transfer runs on its own instance and thread
    common.check_finite();
    std::size_t const bytes = chunk_bytes(c);
    std::size_t const offset = static_cast<std::size_t>(c) * m_chunk_bytes;
    m_pending[j] =
        std::async(std::launch::async, [this, j, bytes, offset] { m_target.store(m_stage[j], j, bytes, offset); });
  }
  void finish_writes() override {
    wait(0);
    wait(1);
    m_loaded = -1;
  }
  void rewind() override { finish_writes(); }
  const_bytes_view fetch(int step) override {
    auto const& common = this->m_common;
    int const c = step / m_interval, j = c % 2;
    if (m_loaded != c) {
      if (!m_pending[j].valid()) {
        common.m_space.fence();
        load(c, j);
      } else {
        wait(j);
      }
      m_loaded = c;
      if (c > 0) {
        int const jn = (c - 1) % 2;
        common.m_space.fence();  // the decode of the previous chunk from that slot is done
        wait(jn);
        m_pending[jn] = std::async(std::launch::async, [this, c, jn] { load(c - 1, jn); });
      }
    }
    return Kokkos::subview(m_stage[j], common.range((step - c * m_interval) * common.m_step_bytes));
  }
  std::size_t staging_bytes() const override { return 2 * m_chunk_bytes; }
  DiskFile* disk() override { return m_target.disk(); }

 private:
  std::size_t chunk_bytes(int c) const {
    return static_cast<std::size_t>(std::min(m_interval, this->m_common.m_steps - c * m_interval)) *
           this->m_common.m_step_bytes;
  }
  // Chunk c -> staging chunk j (on the transfer thread, or here when nothing was prefetched).
  void load(int c, int j) { m_target.load(m_stage[j], j, chunk_bytes(c), static_cast<std::size_t>(c) * m_chunk_bytes); }
  void wait(int j) {
    if (m_pending[j].valid()) m_pending[j].get();  // rethrows a failed transfer
  }

  int m_interval;
  std::size_t m_chunk_bytes;
  int m_loaded = -1;
  bytes_view m_stage[2];
  Target m_target;
  std::future<void> m_pending[2];
};

/// Byte copy between a staging chunk and host memory on the transfer instance (a plain memcpy
/// on host backends).
template <class ExecSpace, class Dst, class Src>
void copy_bytes(ExecSpace const& transfer, Dst const& dst, Src const& src, std::size_t bytes) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible) {
    std::memcpy(dst.data(), src.data(), bytes);
  } else {
    Kokkos::deep_copy(transfer, dst, src);
    transfer.fence();
  }
}

/// Host storage in `HostMemory` (page-locked: PinnedSpace, or Kokkos::HostSpace).
template <class ExecSpace, class HostMemory>
class HostTarget {
 public:
  using bytes_view = Kokkos::View<std::uint8_t*, typename ExecSpace::memory_space>;
  HostTarget(ExecSpace const& space, std::size_t total, std::size_t, std::string const&)
      : m_transfer(transfer_instance(space)),
        m_host(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("ksweep::storage::host")), total) {}
  void store(bytes_view const& stage, int, std::size_t bytes, std::size_t offset) {
    copy_bytes(m_transfer, host(offset, bytes), head(stage, bytes), bytes);
  }
  void load(bytes_view const& stage, int, std::size_t bytes, std::size_t offset) {
    copy_bytes(m_transfer, head(stage, bytes), host(offset, bytes), bytes);
  }
  DiskFile* disk() { return nullptr; }

 private:
  static auto head(bytes_view const& stage, std::size_t bytes) {
    return Kokkos::subview(stage, Kokkos::make_pair(std::size_t(0), bytes));
  }
  auto host(std::size_t offset, std::size_t bytes) const {
    return Kokkos::subview(m_host, Kokkos::make_pair(offset, offset + bytes));
  }
  ExecSpace m_transfer;  // see transfer_instance
  Kokkos::View<std::uint8_t*, HostMemory> m_host;
};

/// Disk storage: a per-run file, through page-locked bounce buffers on devices.
template <class ExecSpace>
class DiskTarget {
 public:
  using memory_space = typename ExecSpace::memory_space;
  using bytes_view = Kokkos::View<std::uint8_t*, memory_space>;
  static constexpr bool device_is_host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;

  DiskTarget(ExecSpace const& space, std::size_t total, std::size_t chunk_bytes, std::string const& disk_dir)
      : m_transfer(transfer_instance(space)), m_file(std::make_unique<DiskFile>(disk_dir, total)) {
    if constexpr (!device_is_host) {
      for (auto& b : m_bounce)
        b = bounce_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("ksweep::storage::bounce")),
                        chunk_bytes);
    }
  }
  void store(bytes_view const& stage, int j, std::size_t bytes, std::size_t offset) {
    if constexpr (device_is_host) {
      m_file->write(stage.data(), bytes, offset);
    } else {
      Kokkos::deep_copy(m_transfer, Kokkos::subview(m_bounce[j], Kokkos::make_pair(std::size_t(0), bytes)),
                        Kokkos::subview(stage, Kokkos::make_pair(std::size_t(0), bytes)));
      m_transfer.fence();
      m_file->write(m_bounce[j].data(), bytes, offset);
    }
  }
  void load(bytes_view const& stage, int j, std::size_t bytes, std::size_t offset) {
    if constexpr (device_is_host) {
      m_file->read(stage.data(), bytes, offset);
    } else {
      m_file->read(m_bounce[j].data(), bytes, offset);
      Kokkos::deep_copy(m_transfer, Kokkos::subview(stage, Kokkos::make_pair(std::size_t(0), bytes)),
                        Kokkos::subview(m_bounce[j], Kokkos::make_pair(std::size_t(0), bytes)));
      m_transfer.fence();
    }
  }
  DiskFile* disk() { return m_file.get(); }

 private:
  using bounce_view = Kokkos::View<std::uint8_t*, typename PinnedSpace<memory_space>::type>;
  ExecSpace m_transfer;  // see transfer_instance
  std::unique_ptr<DiskFile> m_file;
  bounce_view m_bounce[2];
};

template <class ExecSpace>
using PinnedHostSteps =
    StagedSteps<ExecSpace, HostTarget<ExecSpace, typename PinnedSpace<typename ExecSpace::memory_space>::type>>;
template <class ExecSpace>
using HostSteps = StagedSteps<ExecSpace, HostTarget<ExecSpace, Kokkos::HostSpace>>;
template <class ExecSpace>
using DiskSteps = StagedSteps<ExecSpace, DiskTarget<ExecSpace>>;

/// The steps of a location (storage.pinned picks the host memory).
template <class ExecSpace>
std::unique_ptr<Steps<ExecSpace>> make_steps(StepsCommon<ExecSpace> const& common, StorageConfig const& cfg) {
  switch (cfg.location) {
    case Location::device:
      return std::make_unique<DeviceSteps<ExecSpace>>(common);
    case Location::host:
      if (cfg.pinned) return std::make_unique<PinnedHostSteps<ExecSpace>>(common, cfg.transfer_interval, cfg.disk_dir);
      return std::make_unique<HostSteps<ExecSpace>>(common, cfg.transfer_interval, cfg.disk_dir);
    case Location::disk:
      return std::make_unique<DiskSteps<ExecSpace>>(common, cfg.transfer_interval, cfg.disk_dir);
  }
  names::location.reject(std::to_string(static_cast<int>(cfg.location)));
}

}  // namespace impl

/// Encoded storage of `n_steps` steps of `values_per_step` values each.
template <class Real, class ExecSpace>
class StepStore {
 public:
  using memory_space = typename ExecSpace::memory_space;
  using bytes_view = Kokkos::View<std::uint8_t*, memory_space>;
  using const_bytes_view = Kokkos::View<std::uint8_t const*, memory_space>;

  StepStore(ExecSpace const& space, StorageConfig const& cfg, std::size_t values_per_step, int n_steps)
      : m_space(space),
        m_cfg(cfg),
        m_n(values_per_step),
        m_steps(n_steps),
        m_step_bytes(encoded_bytes(cfg.dtype, values_per_step, sizeof(Real))) {
    KSWEEP_REQUIRE(n_steps >= 1, "ksweep::storage::StepStore: n_steps = " << n_steps << " must be >= 1");
    KSWEEP_REQUIRE(cfg.transfer_interval >= 1,
                   "storage.transfer_interval = " << cfg.transfer_interval << " must be >= 1");
    m_bad = Kokkos::View<int, memory_space>(Kokkos::view_alloc(m_space, std::string("ksweep::storage::bad")));
    m_steps_at = impl::make_steps(impl::StepsCommon<ExecSpace>{m_space, m_step_bytes, n_steps, m_bad}, cfg);
  }
  StepStore(StepStore const&) = delete;
  StepStore& operator=(StepStore const&) = delete;

  std::size_t step_bytes() const { return m_step_bytes; }
  std::size_t values_per_step() const { return m_n; }
  int steps() const { return m_steps; }
  /// Bytes held at the storage location (device, host or disk).
  std::size_t stored_bytes() const { return m_step_bytes * static_cast<std::size_t>(m_steps); }
  /// Device bytes of the staging chunks (zero for device storage).
  std::size_t staging_bytes() const { return m_steps_at->staging_bytes(); }
  Location location() const { return m_cfg.location; }
  Dtype dtype() const { return m_cfg.dtype; }
  impl::DiskFile* disk() { return m_steps_at->disk(); }

  /// Encodes and saves step `step` (steps in increasing order).
  void put(int step, Kokkos::View<Real const*, memory_space> values) {
    check_size(values.extent(0));
    put_from(step, ViewValues<Real const, memory_space>{values});
  }

  /// Encodes values_per_step() values read through `source` (a codec value source, such as a
  /// ring of wavefield cells) and saves them as step `step`: one launch.
  template <class Source>
  void put_from(int step, Source const& source) {
    encode_from<ExecSpace, Real>(m_space, m_cfg.dtype, source, m_n, m_steps_at->write_slot(step), m_bad);
    m_steps_at->written(step);
  }

  /// Waits until every saved step is at its location; throws on a failed transfer.
  void finish_writes() { m_steps_at->finish_writes(); }

  /// Ready to save a new run of the same size from step 0 into the allocations it holds (no
  /// fresh memory to fault in): transfers still pending are waited for (a failed one rethrows)
  /// and the NaN flag is cleared. Asynchronous on the store's instance.
  void rewind() {
    m_steps_at->rewind();
    Kokkos::deep_copy(m_space, m_bad, 0);
  }

  /// Decodes step `step` into `values` (steps in decreasing order).
  void get(int step, Kokkos::View<Real*, memory_space> values) {
    check_size(values.extent(0));
    with_decoder(fetch(step), ViewValues<Real, memory_space>{values}, [&](auto const& decoder) {
      launch_for("ksweep::storage::decode", Kokkos::RangePolicy<ExecSpace>(m_space, 0, m_n), decoder);
    });
  }

  /// The encoded bytes of step `step` in device memory (steps in decreasing order), valid for
  /// kernels launched on the store's execution space before the next fetch(). Host and disk
  /// stores load the chunk if needed and start loading the chunk before it.
  const_bytes_view fetch(int step) { return m_steps_at->fetch(step); }

  /// Calls launch(decoder) with a per-value functor (index 0 .. values_per_step()-1) that
  /// decodes `bytes` from fetch() through `sink` (a codec value sink), for fusing into a
  /// caller's launch: the functor's type is that of the store's codec (see dispatch_dtype).
  template <class Sink, class Launch>
  void with_decoder(const_bytes_view const& bytes, Sink const& sink, Launch&& launch) const {
    dispatch_dtype(m_cfg.dtype, [&](auto codec) {
      launch(DecodeValues<decltype(codec), Real, memory_space, Sink>{bytes, sink, m_n});
    });
  }

 private:
  void check_size(std::size_t n) const {
    KSWEEP_REQUIRE(n == m_n,
                   "ksweep::storage::StepStore: " << n << " values given, the store holds " << m_n << " per step");
  }

  ExecSpace m_space;
  StorageConfig m_cfg;
  std::size_t m_n;
  int m_steps;
  std::size_t m_step_bytes;
  Kokkos::View<int, memory_space> m_bad;  // set by the encoder on NaN or infinity
  std::unique_ptr<impl::Steps<ExecSpace>> m_steps_at;
};

}  // namespace ksweep::storage
