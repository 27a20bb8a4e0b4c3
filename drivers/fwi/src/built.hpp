#pragma once
// Which orders and kernels this build instantiates (KSWEEP_ORDERS, KSWEEP_KERNELS), for the
// dispatch of Inversion and Modeling: one left out is refused, naming what the build has.

#include <ksweep/base/error.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/fwi/physics.hpp>

#include <ksweep_fwi_built.hpp>

#include <cstddef>
#include <string_view>
#include <tuple>
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

// ---- The physics the facades dispatch to: core::AllPhysics, in physics_table's order ----------

/// `f(tag<core physics>)` for the run-time physics `p`: its row of core::physics_table, the
/// same place in core::AllPhysics (the last one past the table's end).
template <std::size_t I = 0, class F>
auto with_physics(Physics p, F&& f) -> decltype(f(tag<core::PhysicsAt<0>>{})) {
  if constexpr (I + 1 < std::tuple_size_v<core::AllPhysics>) {
    if (static_cast<std::size_t>(p) != I) return with_physics<I + 1>(p, std::forward<F>(f));
  }
  return f(tag<core::PhysicsAt<static_cast<int>(I)>>{});
}

/// Whether this build has the kernel of `Physics` in `Dim` dimensions: "<name>_<Dim>d" in
/// KSWEEP_KERNELS (the comma-separated KSWEEP_FWI_BUILT_KERNELS).
template <int Dim, class Physics>
constexpr bool kernel_built() {
  std::string_view const name = Physics::name, dim = Dim == 3 ? "_3d" : "_2d";
  std::string_view built = KSWEEP_FWI_BUILT_KERNELS;
  while (!built.empty()) {
    std::string_view const kernel = built.substr(0, built.find(','));
    if (kernel.size() == name.size() + dim.size() && kernel.substr(0, name.size()) == name &&
        kernel.substr(name.size()) == dim)
      return true;
    built.remove_prefix(kernel.size() < built.size() ? kernel.size() + 1 : built.size());
    while (!built.empty() && built.front() == ' ') built.remove_prefix(1);
  }
  return false;
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
