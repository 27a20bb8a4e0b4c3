// The benchmark suite on Kokkos::OpenMP (compiled empty when that backend is disabled).
#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_OPENMP)
#include "bench_suite.hpp"

namespace ksweep::bench {
namespace {
BackendRegistrar const registrar{Backend{Kokkos::OpenMP::name(),
                                         [](Options const& o) { return measure_triad<Kokkos::OpenMP>(o); },
                                         [](Options const& o) { register_benchmarks<Kokkos::OpenMP>(o); }}};
}  // namespace
}  // namespace ksweep::bench
#endif
