// The benchmark suite on Kokkos::Serial (compiled empty when that backend is disabled, or left
// out by -DKSWEEP_BENCH_SERIAL=OFF).
#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_SERIAL) && !defined(KSWEEP_BENCH_NO_SERIAL)
#include "bench_suite.hpp"

namespace ksweep::bench {
namespace {
BackendRegistrar const registrar{Backend{Kokkos::Serial::name(),
                                         [](Options const& o) { return measure_triad<Kokkos::Serial>(o); },
                                         [](Options const& o) { register_benchmarks<Kokkos::Serial>(o); }}};
}  // namespace
}  // namespace ksweep::bench
#endif
