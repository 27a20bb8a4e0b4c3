#pragma once
/// \file fp_env.hpp
/// Subnormal numbers on host backends: the library's host kernels run with flush-to-zero and
/// denormals-are-zero set on the thread that runs them, and restore the thread's previous mode
/// when they return, whatever mode the calling program uses.
///
/// Why: wave tails, CPML memories and the adjoint's first steps decay through the subnormal
/// range (below 1.2e-38 in fp32). x86 cores handle subnormal operands and results in microcode,
/// about a hundred times slower than normal arithmetic, and a field full of them slowed whole
/// runs by 2-7x. Flushing changes only values below the smallest normal number (1.2e-38 in
/// fp32, 2.2e-308 in fp64) to zero: every result differs from an unflushed run by less than
/// that in absolute terms, far below the fp32 round-off of any field that matters.
///
/// Where: `FlushDenormals` is a scoped guard applied per unit of host work (a chunk of rows of a
/// batched launch, or a shot's whole time loop in the cache-resident schedule), on the thread
/// that runs it. On devices (CUDA compiles kernels with flush-to-zero off, but GPUs handle
/// subnormals at full speed) and on CPUs without a control register this is a no-op.
/// `set_flush_denormals(false)` turns it off for the whole process (tests compare both).

#include <Kokkos_Core.hpp>

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && (defined(__SSE__) || defined(__x86_64__))
#include <xmmintrin.h>
#define KSWEEP_FP_ENV_MXCSR 1
#elif !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && defined(__aarch64__)
#define KSWEEP_FP_ENV_FPCR 1
#endif

#include <atomic>

namespace ksweep::core {

namespace impl {
inline std::atomic<bool>& flush_denormals_flag() {
  static std::atomic<bool> flag{true};
  return flag;
}
}  // namespace impl

/// Whether the library's host kernels flush subnormals (default: true).
inline bool flush_denormals() { return impl::flush_denormals_flag().load(std::memory_order_relaxed); }
/// Turns the flushing of the library's host kernels on or off for the process.
inline void set_flush_denormals(bool on) { impl::flush_denormals_flag().store(on, std::memory_order_relaxed); }

/// Whether this build can set the mode on host threads (x86 MXCSR, AArch64 FPCR).
constexpr bool can_flush_denormals() {
#if defined(KSWEEP_FP_ENV_MXCSR) || defined(KSWEEP_FP_ENV_FPCR)
  return true;
#else
  return false;
#endif
}

/// Sets flush-to-zero and denormals-are-zero on this thread while it lives (when `on`), then
/// restores the previous mode. Cheap (two control-register accesses): one per unit of work.
class FlushDenormals {
 public:
  KOKKOS_INLINE_FUNCTION explicit FlushDenormals(bool on) {
#if defined(KSWEEP_FP_ENV_MXCSR)
    m_saved = _mm_getcsr();
    m_set = on && (m_saved & 0x8040u) != 0x8040u;
    if (m_set) _mm_setcsr(m_saved | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
#elif defined(KSWEEP_FP_ENV_FPCR)
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(m_saved));
    m_set = on && (m_saved & (1ull << 24)) == 0;
    if (m_set) {
      unsigned long long const v = m_saved | (1ull << 24);  // FZ
      __asm__ __volatile__("msr fpcr, %0" : : "r"(v));
    }
#else
    (void)on;
#endif
  }
  KOKKOS_INLINE_FUNCTION ~FlushDenormals() {
#if defined(KSWEEP_FP_ENV_MXCSR)
    if (m_set) _mm_setcsr(m_saved);
#elif defined(KSWEEP_FP_ENV_FPCR)
    if (m_set) __asm__ __volatile__("msr fpcr, %0" : : "r"(m_saved));
#endif
  }
  FlushDenormals(FlushDenormals const&) = delete;
  FlushDenormals& operator=(FlushDenormals const&) = delete;

 private:
#if defined(KSWEEP_FP_ENV_MXCSR)
  unsigned m_saved = 0;
  bool m_set = false;
#elif defined(KSWEEP_FP_ENV_FPCR)
  unsigned long long m_saved = 0;
  bool m_set = false;
#endif
};

}  // namespace ksweep::core
