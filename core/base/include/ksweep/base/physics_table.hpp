#pragma once
/// \file physics_table.hpp
/// What every layer knows of each physics, in the base layer (no Kokkos): one row per physics
/// (its name as `propagator.physics` and the files say it, a line that describes it, its
/// parameters, whether its model may be split into domains) and one row per parameter (its name,
/// words, unit, bound and option keys). The core's tags point at their rows (core/physics.hpp)
/// and the propagator checks its fields against them (core::check_parameter, geometry.hpp); the
/// configuration's keys (drivers/io), the fwi library, the memory estimate and Python read the
/// same rows, and the top-level CMakeLists.txt reads the physics' names (one row per line, as
/// below) for the kernels of KSWEEP_KERNELS. A physics is named and described here alone.

#include <array>
#include <cstddef>
#include <string_view>

namespace ksweep::core {

/// A parameter of a physics: its name (as the program's keys and files say it), its noun and
/// plural (as messages say it), its unit, the bound every value must exceed, and the options of
/// its bounds and of Adam's step (the inversion's keys).
struct Parameter {
  char const* name;      ///< "vp", "rho": the name in fwi.invert and in the output files
  char const* noun;      ///< "velocity", "density"
  char const* plural;    ///< "velocities", "densities"
  char const* unit;      ///< "m/s", "kg/m^3"
  double lower;          ///< every value is finite and > lower
  char const* min_key;   ///< the option of its lower bound: "vmin", "rho_min"
  char const* max_key;   ///< the option of its upper bound: "vmax", "rho_max"
  char const* step_key;  ///< the option of Adam's step for it: "lr", "lr_rho"
};

// clang-format off
//                                          name   noun        plural        unit      lower  min_key    max_key    step_key
inline constexpr Parameter velocity_parameter{"vp",  "velocity", "velocities", "m/s",    0.0,   "vmin",    "vmax",    "lr"};
inline constexpr Parameter density_parameter {"rho", "density",  "densities",  "kg/m^3", 0.0,   "rho_min", "rho_max", "lr_rho"};
// clang-format on

/// The parameters of each physics, in the order models, gradients and bounds list them: vp first
/// (the velocity, which sets the time step's stability), then the others.
inline constexpr std::array<Parameter, 1> acoustic_parameters = {velocity_parameter};
inline constexpr std::array<Parameter, 2> acoustic_vd_parameters = {velocity_parameter, density_parameter};

/// A physics as the layers above the core know it.
struct PhysicsRow {
  char const* name;             ///< "acoustic_vd": propagator.physics, files, messages
  char const* summary;          ///< "variable density: vp and rho" (the key's choices)
  Parameter const* parameters;  ///< its parameters (above), vp first
  std::size_t n_parameters;     ///< how many
  bool splits;                  ///< whether its model may be split into domains (parallel.domains)
  Parameter const* begin() const { return parameters; }
  Parameter const* end() const { return parameters + n_parameters; }
};

/// Every physics, in the order of core::AllPhysics (physics.hpp, which checks it) and of the
/// values of fwi::Physics.
// One row per line: the top-level CMakeLists.txt reads the names from these lines.
// clang-format off
inline constexpr PhysicsRow physics_table[] = {
    {"acoustic",    "constant density: vp",         acoustic_parameters.data(),    acoustic_parameters.size(),    true},
    {"acoustic_vd", "variable density: vp and rho", acoustic_vd_parameters.data(), acoustic_vd_parameters.size(), false},
};
// clang-format on
inline constexpr int n_physics = static_cast<int>(std::size(physics_table));

/// The row named `name`, or -1.
constexpr int physics_row(std::string_view name) {
  for (int i = 0; i < n_physics; ++i)
    if (name == physics_table[i].name) return i;
  return -1;
}

}  // namespace ksweep::core
