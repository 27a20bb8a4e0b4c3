#pragma once
// Which orders and kernels this build instantiates (KSWEEP_ORDERS, KSWEEP_KERNELS), for the
// dispatch of Inversion and Modeling: one left out is refused, naming what the build has.

#include <ksweep/base/error.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/fwi/physics.hpp>

#include <ksweep_fwi_built.hpp>

#include <type_traits>
#include <utility>

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

// ---- The one registry of the physics the facades dispatch to ---------------------------------

/// `f(tag<core physics>)` for the run-time physics `p`: the one map from fwi::Physics to the
/// core's physics types.
template <class F>
decltype(auto) with_physics(Physics p, F&& f) {
  switch (p) {
    case Physics::acoustic_vd:
      return f(tag<core::AcousticVd>{});
    case Physics::acoustic:
      break;
  }
  return f(tag<core::Acoustic>{});
}

/// Whether this build has the kernel of `Physics` in `Dim` dimensions (KSWEEP_KERNELS).
template <int Dim, class Physics>
constexpr bool kernel_built() {
  if constexpr (std::is_same_v<Physics, core::AcousticVd>)
    return Dim == 3 ? KSWEEP_FWI_HAS_ACOUSTIC_VD_3D : KSWEEP_FWI_HAS_ACOUSTIC_VD_2D;
  else return Dim == 3 ? KSWEEP_FWI_HAS_ACOUSTIC_3D : KSWEEP_FWI_HAS_ACOUSTIC_2D;
}

template <int Order, int Dim, class Physics>
constexpr bool built() {
  return kernel_built<Dim, Physics>() && order_built<Order>();
}

/// `make(order, dim, tag<core physics>)` (integral constants and a tag) for the run-time
/// physics, stencil order and dimension, where this build has them; else an error naming them
/// and what the build has. Inversion's and Modeling's facades dispatch through it alone.
template <class Make>
auto dispatch(Physics physics, int order, int dim, Make&& make) {
  return core::dispatch_order(order, [&](auto o) {
    return with_physics(physics, [&](auto ph) {
      constexpr int O = decltype(o)::value;
      using P = typename decltype(ph)::type;
      auto one = [&](auto d) {
        constexpr int D = decltype(d)::value;
        using R = decltype(make(o, d, ph));
        if constexpr (built<O, D, P>()) {
          return make(o, d, ph);
        } else {
          KSWEEP_REQUIRE(false, "order " << O << " in " << D << "D with physics \"" << to_string(physics)
                                         << "\" is not in this build of ksweep (its orders: " KSWEEP_FWI_BUILT_ORDERS
                                            "; its kernels: " KSWEEP_FWI_BUILT_KERNELS
                                            "): build it with the default KSWEEP_ORDERS and KSWEEP_KERNELS "
                                            "(scripts/build.sh)");
          return R();
        }
      };
      return dim == 3 ? one(std::integral_constant<int, 3>{}) : one(std::integral_constant<int, 2>{});
    });
  });
}

}  // namespace ksweep::fwi::detail
