#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char* argv[]) {
  // Test discovery runs this binary with --gtest_list_tests outside ctest's environment: keep
  // Kokkos' OMP_PROC_BIND advice off stdout, or it would be read as test names.
  ::setenv("OMP_PROC_BIND", "false", 0);
  Kokkos::ScopeGuard guard(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
