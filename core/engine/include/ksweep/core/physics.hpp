#pragma once
/// \file physics.hpp
/// The physics a propagator runs. A physics is a tag type that names its cell bodies (forward,
/// adjoint, imaging: the kernels of every schedule, backend and dimension), the reach of its
/// stencil (the fields' halo and the ring that boundary saving keeps), its coefficients (what its
/// set-up adds to the propagator's c and cell profiles: the checks of its layer, its fields and
/// profiles, their binding to the kernels and the imaging), its parameters and its stability
/// limit. Propagator and GradientEngine are written once over it. The parameters' table lives in
/// parameters.hpp, free of Kokkos, so that the layers above the core read the same one.
///   Acoustic    constant-density acoustics, parameter vp (acoustic_kernels.hpp)
///   AcousticVd  variable-density acoustics, parameters vp and rho (physics/acoustic_vd.hpp)

#include <ksweep/core/acoustic_kernels.hpp>
#include <ksweep/core/parameters.hpp>
#include <ksweep/core/physics/acoustic_vd.hpp>
#include <ksweep/core/stencil.hpp>

#include <array>
#include <cmath>

namespace ksweep::core {

struct Acoustic {
  static constexpr char const* name = "acoustic";
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
  static constexpr char const* name = "acoustic_vd";
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

}  // namespace ksweep::core
