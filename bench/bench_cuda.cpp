// The benchmark suite on Kokkos::Cuda (compiled empty when that backend is disabled).
#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include "bench_suite.hpp"

namespace ksweep::bench {
namespace {
BackendRegistrar const registrar{Backend{Kokkos::Cuda::name(),
                                         [](Options const& o) { return measure_triad<Kokkos::Cuda>(o); },
                                         [](Options const& o) { register_benchmarks<Kokkos::Cuda>(o); }}};
}  // namespace
}  // namespace ksweep::bench
#endif
