#pragma once
/// \file parameters.hpp
/// The parameters of each physics (physics.hpp): what the checks, messages, files and option
/// tables above the core know of each one. Free of Kokkos, so that the layers above the core
/// (the fwi library, the program, Python) read the same table the propagator checks against.

#include <array>

namespace ksweep::core {

/// A parameter of a physics: its name (as the program's keys and files say it), its noun and
/// plural (as messages say it), its unit, and the bound every value must exceed.
struct Parameter {
  char const* name;    ///< "vp", "rho"
  char const* noun;    ///< "velocity", "density"
  char const* plural;  ///< "velocities", "densities"
  char const* unit;    ///< "m/s", "kg/m^3"
  double lower;        ///< every value is finite and > lower
};

/// Constant-density acoustics: the velocity.
inline constexpr std::array<Parameter, 1> acoustic_parameters = {{{"vp", "velocity", "velocities", "m/s", 0.0}}};
/// Variable-density acoustics: the velocity (first: it sets the time step's stability), then the density.
inline constexpr std::array<Parameter, 2> acoustic_vd_parameters = {
    {{"vp", "velocity", "velocities", "m/s", 0.0}, {"rho", "density", "densities", "kg/m^3", 0.0}}};

/// Every one of the n values of a field of parameter `p` is finite and > p.lower; else an error
/// naming the first cell (row-major), its value and unit, and the limit.
void check_parameter(Parameter const& p, float const* x, long long n);
void check_parameter(Parameter const& p, double const* x, long long n);
/// The error of check_parameter for the value `value` at cell `cell`.
[[noreturn]] void parameter_error(Parameter const& p, long long cell, double value);

}  // namespace ksweep::core
