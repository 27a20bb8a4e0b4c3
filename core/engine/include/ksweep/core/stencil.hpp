#pragma once
/// \file stencil.hpp
/// Central finite-difference coefficients of the spatial orders 2, 4, 6 and 8.

#include <Kokkos_Core.hpp>

namespace ksweep::core {

/// Half-width M of the centred stencil of spatial order `Order` (2M = Order).
template <int Order>
inline constexpr int stencil_radius = Order / 2;

/// Coefficients of the centred second derivative: d2u/dx2 ~ (c[0] u_i + sum_k c[k] (u_{i+k} +
/// u_{i-k})) / h^2, k = 1..M; and of the first derivative: du/dx ~ sum_k d[k] (u_{i+k} - u_{i-k})
/// / h (d[0] unused). Taylor coefficients of the standard centred schemes.
template <int Order>
struct StencilCoefficients {
  static_assert(Order == 2 || Order == 4 || Order == 6 || Order == 8,
                "ksweep::core::StencilCoefficients: Order must be 2, 4, 6 or 8");
  static constexpr int radius = Order / 2;
  KOKKOS_INLINE_FUNCTION static constexpr double second(int k) {
    if constexpr (Order == 2) {
      constexpr double c[] = {-2.0, 1.0};
      return c[k];
    } else if constexpr (Order == 4) {
      constexpr double c[] = {-5.0 / 2.0, 4.0 / 3.0, -1.0 / 12.0};
      return c[k];
    } else if constexpr (Order == 6) {
      constexpr double c[] = {-49.0 / 18.0, 3.0 / 2.0, -3.0 / 20.0, 1.0 / 90.0};
      return c[k];
    } else {
      constexpr double c[] = {-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0};
      return c[k];
    }
  }
  KOKKOS_INLINE_FUNCTION static constexpr double first(int k) {
    if constexpr (Order == 2) {
      constexpr double c[] = {0.0, 1.0 / 2.0};
      return c[k];
    } else if constexpr (Order == 4) {
      constexpr double c[] = {0.0, 2.0 / 3.0, -1.0 / 12.0};
      return c[k];
    } else if constexpr (Order == 6) {
      constexpr double c[] = {0.0, 3.0 / 4.0, -3.0 / 20.0, 1.0 / 60.0};
      return c[k];
    } else {
      constexpr double c[] = {0.0, 4.0 / 5.0, -1.0 / 5.0, 4.0 / 105.0, -1.0 / 280.0};
      return c[k];
    }
  }
};

/// Largest stable Courant number v dt / h of the leapfrog scheme in `ndim` dimensions for a
/// spatial order (2, 4, 6, 8): 2 / sqrt(ndim * S) with S the largest eigenvalue of the 1D
/// second-derivative stencil, |c0 + 2 sum_k c_k (-1)^k|.
double courant_limit(int order, int ndim = 2);

/// Calls f(std::integral_constant<int, Order>{}) for a runtime order in {2, 4, 6, 8}
/// (names::order); another order is an error that names the allowed ones.
template <class F>
decltype(auto) dispatch_order(int order, F&& f);

}  // namespace ksweep::core

#include <ksweep/base/names.hpp>

#include <string>
#include <type_traits>

template <class F>
decltype(auto) ksweep::core::dispatch_order(int order, F&& f) {
  switch (order) {
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 6:
      return f(std::integral_constant<int, 6>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    default:
      names::order.reject(std::to_string(order));
  }
}
