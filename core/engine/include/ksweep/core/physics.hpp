#pragma once
/// \file physics.hpp
/// The physics a propagator runs. A physics is a tag type that names its cell bodies (forward,
/// adjoint, imaging: the kernels of every schedule, backend and dimension), the reach of its
/// stencil (the fields' halo and the ring that boundary saving keeps), its coefficients (what its
/// set-up adds to the propagator's c and cell profiles: the checks of its layer, its fields and
/// profiles, their binding to the kernels and the imaging), its parameters and its stability
/// limit. Propagator and GradientEngine are written once over it. Its row (`row`: name,
/// parameters, whether it splits) lives in base/physics_table.hpp, free of Kokkos, so that the layers
/// above the core read the same one; AllPhysics lists the tags in the table's order.
///   Acoustic    constant-density acoustics, parameter vp (acoustic_kernels.hpp)
///   AcousticVd  variable-density acoustics, parameters vp and rho (physics/acoustic_vd.hpp)

#include <ksweep/core/acoustic_kernels.hpp>
#include <ksweep/base/physics_table.hpp>
#include <ksweep/core/physics/acoustic_vd.hpp>
#include <ksweep/core/stencil.hpp>

#include <array>
#include <cmath>
#include <string_view>
#include <tuple>
#include <utility>

namespace ksweep::core {

struct Acoustic {
  static constexpr PhysicsRow const& row = physics_table[0];
  static constexpr char const* name = row.name;
  template <class Real, int Order, int Dim>
  using cell = AcousticCell<Real, Order, Dim>;
  template <class Real, int Order, class MemorySpace, int Dim>
  using imaging = AcousticImaging<Real, Order, MemorySpace, Dim>;
  template <class Real, int Order, class MemorySpace, int Dim>
  using coefficients = AcousticCoefficients<Real, Order, MemorySpace, Dim>;
  static constexpr auto const& parameters = acoustic_parameters;
  /// The largest stable v dt / dh of the order in `dim` dimensions.
  static double courant_limit(int order, int dim) { return core::courant_limit(order, dim); }
};

struct AcousticVd {
  static constexpr PhysicsRow const& row = physics_table[1];
  static constexpr char const* name = row.name;
  template <class Real, int Order, int Dim>
  using cell = AcousticVdCell<Real, Order, Dim>;
  template <class Real, int Order, class MemorySpace, int Dim>
  using imaging = AcousticVdImaging<Real, Order, MemorySpace, Dim>;
  template <class Real, int Order, class MemorySpace, int Dim>
  using coefficients = AcousticVdCoefficients<Real, Order, MemorySpace, Dim>;
  static constexpr auto const& parameters = acoustic_vd_parameters;
  /// The largest stable v dt / dh of the order in `dim` dimensions, v the effective velocity.
  static double courant_limit(int order, int dim) { return vd_courant_limit(order, dim); }
};

/// Every physics, in the order of physics_table (the run-time index of fwi::Physics).
using AllPhysics = std::tuple<Acoustic, AcousticVd>;
/// The tag of row `Row` of physics_table: `PhysicsAt<physics_row("acoustic_vd")>` is AcousticVd.
template <int Row>
using PhysicsAt = std::tuple_element_t<static_cast<std::size_t>(Row), AllPhysics>;

namespace detail {
template <std::size_t... I>
constexpr bool rows_match(std::index_sequence<I...>) {
  return std::tuple_size_v<AllPhysics> == std::size(physics_table) &&
         ((std::string_view(std::tuple_element_t<I, AllPhysics>::name) == physics_table[I].name &&
           std::tuple_element_t<I, AllPhysics>::parameters.size() == physics_table[I].n_parameters) &&
          ...);
}
}  // namespace detail
static_assert(detail::rows_match(std::make_index_sequence<std::tuple_size_v<AllPhysics>>{}),
              "AllPhysics and physics_table list the same physics in the same order");

}  // namespace ksweep::core
