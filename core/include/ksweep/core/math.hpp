#pragma once
/// \file math.hpp
/// Device-callable math functions across Kokkos versions (3.4 keeps them in
/// Kokkos::Experimental; 3.7 and later in Kokkos).

#include <Kokkos_Core.hpp>

namespace ksweep::core::math {

template <class T>
KOKKOS_INLINE_FUNCTION T sqrt(T x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}

}  // namespace ksweep::core::math
