#pragma once
#include <Kokkos_Core.hpp>
#define TEST_EXECSPACE Kokkos::Serial
#define TEST_CATEGORY serial
