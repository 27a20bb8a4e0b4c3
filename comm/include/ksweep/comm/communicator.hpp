#pragma once
/// \file communicator.hpp
/// A small communicator over MPI for shot-parallel FWI, and a single-rank stand-in for builds
/// without MPI. Device views are reduced through host mirrors unless the build enables
/// GPU-aware MPI.

#include <ksweep/core/config.hpp>
#include <ksweep/core/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ksweep::comm {

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

/// The world communicator (one rank without MPI).
class Communicator {
 public:
  Communicator();
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  bool is_root() const { return m_rank == 0; }
  /// Ranks on this rank's node (sharing its memory), this one included.
  int local_size() const { return m_local_size; }

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
  /// Sum over ranks, in place.
  void allreduce_sum(double* data, std::size_t n) const;
  void allreduce_sum(float* data, std::size_t n) const;
  double allreduce_sum(double x) const {
    allreduce_sum(&x, 1);
    return x;
  }
  /// Sum of a contiguous view over ranks, in place. `space` is fenced first.
  template <class ExecSpace, class View>
  void allreduce_sum_view(ExecSpace const& space, View const& v) const {
    space.fence();
    if (m_size == 1) return;
    using host_accessible = Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>;
    if constexpr (host_accessible::accessible || KSWEEP_ENABLE_GPU_AWARE_MPI) {
      allreduce_sum(v.data(), v.span());
    } else {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
      allreduce_sum(h.data(), h.span());
      Kokkos::deep_copy(v, h);
    }
  }
  /// Ends every rank's process with `message` on stderr; never returns (no rank can hang).
  [[noreturn]] void abort(std::string const& message, int code = 1) const;

 private:
  int m_rank = 0, m_size = 1;
  int m_local_size = 1;
};

/// The contiguous slice [first, first + count) of `n` items taken by `rank` of `size`:
/// the first n % size ranks take one more.
struct Slice {
  int first = 0, count = 0;
};
Slice slice_of(int n, int rank, int size);

}  // namespace ksweep::comm
