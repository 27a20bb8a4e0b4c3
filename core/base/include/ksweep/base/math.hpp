#pragma once
/// \file math.hpp
/// Device-callable math functions across Kokkos versions (3.4 keeps them in
/// Kokkos::Experimental; 3.7 and later in Kokkos).

#include <Kokkos_Core.hpp>

namespace ksweep::math {

template <class T>
KOKKOS_INLINE_FUNCTION T sqrt(T x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}

/// Rounds to the nearest integer, ties to even (the default rounding mode).
template <class T>
KOKKOS_INLINE_FUNCTION T nearbyint(T x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::nearbyint(x);
#else
  return Kokkos::Experimental::nearbyint(x);
#endif
}

}  // namespace ksweep::math
