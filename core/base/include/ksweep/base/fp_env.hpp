#pragma once
/// \file fp_env.hpp
/// The floating-point environment of the library's kernels: subnormal numbers are flushed to
/// zero in every kernel, on every backend, so that results are the same bits on all of them.
///
/// Host backends: every kernel the library launches (ksweep::launch_for / launch_reduce in
/// launch.hpp, and the row, shot and point launches of core built on them) runs with
/// flush-to-zero and denormals-are-zero set on the thread that runs it (`FlushDenormals`, one
/// guard per unit of work) and restores the thread's previous mode when it returns, whatever
/// mode the calling program uses. CUDA builds compile device code with `--ftz=true` (and
/// `--fmad=false`; see the top-level CMakeLists.txt), which flushes fp32 operands and results
/// the same way. GPUs have no flush for fp64: fp64 results agree with the host's only where no
/// value falls below 2.2e-308.
///
/// Why flush: wave tails, the stencil's numerical precursors, CPML memories, residuals scaled
/// by 1/(batch nt nr) and the Ricker wavelet's tails decay through the subnormal range (below
/// 1.2e-38 in fp32). x86 cores handle subnormal operands and results in microcode, up to a
/// hundred times slower than normal arithmetic (about 3x on whole runs on Intel Xeon, 2-7 % on
/// AMD EPYC). Flushing changes only values below the smallest normal number (1.2e-38 in fp32,
/// 2.2e-308 in fp64) to zero.
///
/// Why in every kernel: a kernel left out (the point work, a residual, the optimizer) computes
/// subnormals where the others flush them, and the result then depends on which launches a
/// schedule fuses into a flushed unit of work: the bits differed between schedules, thread
/// counts and rank counts until every launch went through one place.
/// `set_flush_denormals(false)` turns flushing off for the whole process on hosts (benchmarks
/// and tests compare both); device code keeps its compiled mode.

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && (defined(__SSE__) || defined(__x86_64__))
#include <xmmintrin.h>
#define KSWEEP_FP_ENV_MXCSR 1
#elif !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && defined(__aarch64__)
#define KSWEEP_FP_ENV_FPCR 1
#endif

#include <atomic>

namespace ksweep::fp {

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

/// Sets flush-to-zero and denormals-are-zero on this host thread while it lives (when `on`),
/// then restores the previous mode. Cheap (two control-register accesses): one per unit of work.
class FlushDenormals {
 public:
  explicit FlushDenormals(bool on) {
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
  ~FlushDenormals() {
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

}  // namespace ksweep::fp
