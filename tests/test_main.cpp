#include <ksweep/core/runtime.hpp>
#include <ksweep/core/schedule.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>

int main(int argc, char* argv[]) {
  // Test discovery runs this binary with --gtest_list_tests outside ctest's environment: keep
  // Kokkos' OMP_PROC_BIND advice off stdout, or it would be read as test names.
  ::setenv("OMP_PROC_BIND", "false", 0);
  std::optional<ksweep::core::KokkosSession> kokkos;
  try {
    kokkos.emplace(argc, argv);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  // --ksweep-schedule=NAME: every propagator of the run starts with that schedule (the test
  // programs run the physics tests a second time with `cells`, the launches of devices).
  for (int i = 1; i < argc; ++i) {
    char const* opt = "--ksweep-schedule=";
    if (std::strncmp(argv[i], opt, std::strlen(opt)) == 0)
      ksweep::core::set_default_schedule(ksweep::core::parse_schedule(argv[i] + std::strlen(opt)));
  }
  return RUN_ALL_TESTS();
}
