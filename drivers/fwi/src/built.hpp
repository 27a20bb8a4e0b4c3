#pragma once
// Which orders and kernels this build instantiates (KSWEEP_ORDERS, KSWEEP_KERNELS), for the
// dispatch of Inversion and Modeling: one left out is refused, naming what the build has.

#include <ksweep/base/error.hpp>
#include <ksweep/core/physics.hpp>

#include <ksweep_fwi_built.hpp>

#include <type_traits>

namespace ksweep::fwi::detail {

/// A type as a value (C++17's std::type_identity).
template <class T>
struct tag {
  using type = T;
};

template <int Order>
constexpr bool order_built() {
  if constexpr (Order == 2) return KSWEEP_FWI_HAS_ORDER_2;
  else if constexpr (Order == 4) return KSWEEP_FWI_HAS_ORDER_4;
  else if constexpr (Order == 6) return KSWEEP_FWI_HAS_ORDER_6;
  else return KSWEEP_FWI_HAS_ORDER_8;
}

template <int Order, int Dim, class Physics>
constexpr bool built() {
  constexpr bool vd = !std::is_same_v<Physics, core::Acoustic>;
  constexpr bool kernel = vd ? (Dim == 3 ? KSWEEP_FWI_HAS_ACOUSTIC_VD_3D : KSWEEP_FWI_HAS_ACOUSTIC_VD_2D)
                             : (Dim == 3 ? KSWEEP_FWI_HAS_ACOUSTIC_3D : KSWEEP_FWI_HAS_ACOUSTIC_2D);
  return kernel && order_built<Order>();
}

/// `make()` where this build has the order, dimension and physics; else an error naming them.
template <int Order, int Dim, class Physics, class Make>
auto make_if_built(Make&& make) -> decltype(make()) {
  if constexpr (built<Order, Dim, Physics>()) {
    return make();
  } else {
    KSWEEP_REQUIRE(false, "order " << Order << " in " << Dim << "D with "
                                   << (std::is_same_v<Physics, core::Acoustic> ? "constant" : "variable")
                                   << " density is not in this build of ksweep (its orders: " KSWEEP_FWI_BUILT_ORDERS
                                      "; its kernels: " KSWEEP_FWI_BUILT_KERNELS
                                      "): build it with the default KSWEEP_ORDERS and KSWEEP_KERNELS "
                                      "(scripts/build.sh)");
    return decltype(make())();
  }
}

}  // namespace ksweep::fwi::detail
