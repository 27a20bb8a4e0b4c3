#pragma once
/// \file spare_buffer.hpp
/// One process-wide spare buffer per value type and memory space, for the largest allocation of a
/// gradient on a host backend (the layer's saved differences, GradientEngine): an engine hands its
/// buffer back when it goes, and the next one takes it instead of allocating. Each page of a fresh
/// host allocation costs a page fault at its first touch, which for buffers of gigabytes costs more
/// than the sweep that fills them (docs/PERFORMANCE.md, "A vjp taken apart"); a program that makes
/// a new modelling per call (Python's ksweep.scalar) would pay that at every call. Device memory
/// has no such cost and is not held back (GPU memory belongs to the caller between calls).

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <mutex>
#include <string>

namespace ksweep::core {

template <class Real, class MemorySpace>
class SpareBuffer {
 public:
  using view = Kokkos::View<Real*, MemorySpace>;
  /// Whether buffers of this memory space are kept: those of host-accessible memory.
  static constexpr bool kept = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible;

  /// A buffer of at least n values, not initialised: the spare when it is large enough, else a
  /// new allocation labelled `label`.
  static view take(std::size_t n, std::string const& label) {
    if constexpr (kept) {
      std::lock_guard<std::mutex> lock(mutex());
      view& s = slot();
      if (s.extent(0) >= n && s.extent(0) > 0) {
        view v = s;
        s = view();
        return v;
      }
    }
    return view(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
  }

  /// Hands a buffer back: it becomes the spare when it is larger than the one held (one buffer
  /// is held, the largest; the other is freed).
  static void give(view v) {
    if constexpr (kept) {
      std::lock_guard<std::mutex> lock(mutex());
      view& s = slot();
      if (v.extent(0) > s.extent(0)) s = v;
    }
  }

  /// Frees the spare (also done at Kokkos::finalize).
  static void release() {
    std::lock_guard<std::mutex> lock(mutex());
    slot() = view();
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static view& slot() {
    static view v;
    static bool const hooked = (Kokkos::push_finalize_hook([] { slot() = view(); }), true);
    (void)hooked;
    return v;
  }
};

}  // namespace ksweep::core
