#pragma once
/// \file communicator.hpp
/// A small communicator over MPI for shot-parallel FWI, and a single-rank stand-in for builds
/// without MPI. Device views go to MPI directly where the MPI library handles device memory
/// (GPU-aware MPI, asked at run time: gpu_aware_mpi()), through host copies otherwise; both
/// give the same bits.

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace ksweep::comm {

/// How data in device memory meets MPI: `automatic` hands MPI device pointers where
/// gpu_aware_mpi() says it takes them and stages through host copies otherwise; `staged` always
/// copies through host buffers, host memory too (tests use it to prove that both paths give the
/// same bits); `direct` never stages.
enum class Staging { automatic, staged, direct };
/// Sets the process-wide choice (default `automatic`); call it before transfers start.
void set_staging(Staging s);
Staging staging();

/// Whether the MPI library of this process reads and writes device (CUDA) memory itself, asked
/// once at run time: the environment variable KSWEEP_GPU_AWARE_MPI (1: yes, 0: no) where set,
/// else Open MPI's MPIX_Query_cuda_support() where the library has that extension, else no.
/// Always no in builds without MPI, without a device backend, or configured with
/// -DKSWEEP_ENABLE_GPU_AWARE_MPI=OFF.
bool gpu_aware_mpi();
/// One line on how device data travels, e.g. "GPU-aware (Open MPI reports CUDA support)" or
/// "staged through host memory (the MPI library reports no CUDA support)".
std::string gpu_aware_mpi_reason();
/// KSWEEP_GPU_AWARE_MPI as set: 1, 0, or -1 when unset or empty; any other value is an error
/// naming it, on every build (programs check it when they start; nothing is cached).
int gpu_aware_mpi_switch();

/// Whether views in `MemorySpace` travel through host copies (see Staging).
template <class MemorySpace>
bool staged() {
  Staging const s = staging();
  if (s != Staging::automatic) return s == Staging::staged;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible) return false;
  else return !gpu_aware_mpi();
}

/// Calls f(pointer) with data of the contiguous view `v` that MPI may read and write: `v`'s own,
/// or a host copy (staged()) filled from `v` when `reads` and copied back when `writes`. Fences
/// `space` before f and after the copy back.
template <class ExecSpace, class View, class F>
void with_mpi_data(ExecSpace const& space, View const& v, bool reads, bool writes, F&& f) {
  space.fence();
  if (!staged<typename View::memory_space>()) {
    f(v.data());
    return;
  }
  auto h = Kokkos::create_mirror(Kokkos::HostSpace(), v);
  if (reads) {
    Kokkos::deep_copy(space, h, v);
    space.fence();
  }
  f(h.data());
  if (writes) {
    Kokkos::deep_copy(space, v, h);
    space.fence();
  }
}

/// Initialises MPI (when built with it and not yet initialised) and finalises it on
/// destruction. Construct before Kokkos.
class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(Environment const&) = delete;
  Environment& operator=(Environment const&) = delete;

 private:
  bool m_owns = false;
};

/// Point-to-point transfers in flight (Communicator::isend_bytes, irecv_bytes), completed by
/// wait_all(). Their buffers must outlive them; on destruction, transfers still in flight are
/// released unfinished (an error path: the process is ending).
class Requests {
 public:
  Requests();
  ~Requests();
  Requests(Requests const&) = delete;
  Requests& operator=(Requests const&) = delete;
  /// Waits for every transfer in flight.
  void wait_all();
  bool empty() const;

 private:
  friend class Communicator;
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// The world communicator (one rank without MPI), or a part of it (split()).
class Communicator {
 public:
  /// The world. Not a collective call: the node's ranks (local_size, local_rank) are asked once,
  /// by Environment on every rank (or, where MPI was initialised without it, by the first world
  /// Communicator, which every rank must then construct).
  Communicator();
  /// The ranks of the same `color`, ranked by `key` (then by their rank here): a collective
  /// call on every rank of this communicator. Without MPI, this communicator again.
  Communicator split(int color, int key) const;
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  bool is_root() const { return m_rank == 0; }
  /// Ranks on this rank's node (sharing its memory), this one included.
  int local_size() const { return m_local_size; }
  /// This rank's index among the ranks of its node (0 .. local_size() - 1), by world rank.
  int local_rank() const { return m_local_rank; }

  void barrier() const;
  /// Broadcasts bytes from `root`.
  void broadcast_bytes(void* data, std::size_t bytes, int root = 0) const;
  template <class T>
  void broadcast(std::vector<T>& v, int root = 0) const {
    std::uint64_t n = v.size();
    broadcast_bytes(&n, sizeof(n), root);
    v.resize(n);
    if (n) broadcast_bytes(v.data(), n * sizeof(T), root);
  }
  /// Every rank's `text`, in rank order, on `root` (collective; empty on the other ranks).
  std::vector<std::string> gather(std::string const& text, int root = 0) const;
  /// Sum over ranks, in place.
  void allreduce_sum(double* data, std::size_t n) const;
  void allreduce_sum(float* data, std::size_t n) const;
  double allreduce_sum(double x) const {
    allreduce_sum(&x, 1);
    return x;
  }
  /// Sum of a contiguous view over ranks, in place. `space` is fenced first; the copies through
  /// a host copy (staged()) are on `space`, fenced too.
  template <class ExecSpace, class View>
  void allreduce_sum_view(ExecSpace const& space, View const& v) const {
    space.fence();
    if (m_size == 1) return;
    with_mpi_data(space, v, true, true, [&](auto* p) { allreduce_sum(p, v.span()); });
  }
  /// Bitwise or over ranks of `bytes` bytes, in place: parts that each rank fills alone (zeros
  /// elsewhere) put together bit for bit.
  void allreduce_bor(void* data, std::size_t bytes) const;
  /// Sends `send_bytes` to rank `dest` and receives `recv_bytes` from rank `source` at once
  /// (-1: no such rank, nothing sent or received).
  void sendrecv_bytes(void const* send, std::size_t send_bytes, int dest, void* recv, std::size_t recv_bytes,
                      int source) const;
  /// Starts sending `bytes` to rank `dest` with `tag` (-1: nothing), completed by `r`.
  void isend_bytes(void const* data, std::size_t bytes, int dest, int tag, Requests& r) const;
  /// Starts receiving `bytes` from rank `source` with `tag` (-1: nothing), completed by `r`.
  void irecv_bytes(void* data, std::size_t bytes, int source, int tag, Requests& r) const;
  /// Point to point: `n` doubles to / from rank `peer`.
  void send(double const* data, std::size_t n, int peer) const;
  void recv(double* data, std::size_t n, int peer) const;
  void broadcast(double* data, std::size_t n, int root) const { broadcast_bytes(data, n * sizeof(double), root); }

  /// A sum over ranks that does not depend on how the terms are split over them: the partial
  /// sum in `views` (contiguous views of double) travels from rank 0 to the last rank; rank r
  /// receives the partial of ranks 0..r-1 into `views`, calls `add_local()`, which adds its own
  /// terms to `views` one by one in their global order, and passes the result on; the last
  /// rank's sum is broadcast to all. With the terms in global order over the ranks (contiguous
  /// slices), every rank ends with (((v + t0) + t1) + ...) exactly as one rank adding all
  /// terms would. Rank 0 starts from what `views` hold (zero them first for a plain sum).
  /// `space` is fenced before any transfer.
  template <class ExecSpace, class AddLocal, class... Views>
  void sum_in_rank_order(ExecSpace const& space, AddLocal&& add_local, Views const&... views) const {
    if (m_rank > 0)
      (with_host_data(space, views, true, [&](double* p, std::size_t n) { recv(p, n, m_rank - 1); }), ...);
    add_local();
    space.fence();
    if (m_size == 1) return;
    if (m_rank + 1 < m_size)
      (with_host_data(space, views, false, [&](double* p, std::size_t n) { send(p, n, m_rank + 1); }), ...);
    (with_host_data(space, views, true, [&](double* p, std::size_t n) { broadcast(p, n, m_size - 1); }), ...);
  }

  /// Ends every rank's process with `message` on stderr; never returns (no rank can hang).
  [[noreturn]] void abort(std::string const& message, int code = 1) const;

 private:
  // Calls f(pointer, size) on data of the contiguous view `v` that MPI may use (with_mpi_data),
  // copied back into `v` when `writes`.
  template <class ExecSpace, class View, class F>
  static void with_host_data(ExecSpace const& space, View const& v, bool writes, F&& f) {
    static_assert(std::is_same_v<typename View::non_const_value_type, double>, "sum_in_rank_order sums doubles");
    with_mpi_data(space, v, true, writes, [&](double* p) { f(p, v.span()); });
  }

  struct Handle;  // the MPI communicator of a split (none: the world)
  std::shared_ptr<Handle> m_handle;
  int m_rank = 0, m_size = 1;
  int m_local_size = 1, m_local_rank = 0;
};

/// The ranks of the world (1 without MPI or before MPI starts), asked of MPI alone: unlike
/// constructing a Communicator (which learns the ranks per node from every rank), not collective.
int world_size();

/// The contiguous slice [first, first + count) of `n` items taken by `rank` of `size`:
/// the first n % size ranks take one more.
struct Slice {
  int first = 0, count = 0;
};
Slice slice_of(int n, int rank, int size);

}  // namespace ksweep::comm
