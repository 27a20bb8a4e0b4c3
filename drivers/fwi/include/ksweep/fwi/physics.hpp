#pragma once
/// \file physics.hpp
/// The physics a Modeling or an Inversion runs, chosen at run time (the core's Propagator takes
/// it as a type: core::Acoustic, core::AcousticVd), and the names of its parameters.

#include <ksweep/base/error.hpp>

#include <string>
#include <vector>

namespace ksweep::fwi {

enum class Physics {
  acoustic,     ///< constant-density acoustics: vp (m/s)
  acoustic_vd,  ///< variable-density acoustics: vp (m/s) and rho (kg/m^3)
};

/// "acoustic" or "acoustic_vd".
inline char const* to_string(Physics p) { return p == Physics::acoustic_vd ? "acoustic_vd" : "acoustic"; }

/// The physics named `name`; an unknown name is an error naming it and the choices.
inline Physics parse_physics(std::string const& name) {
  if (name == "acoustic") return Physics::acoustic;
  if (name == "acoustic_vd") return Physics::acoustic_vd;
  KSWEEP_REQUIRE(false, "physics \"" << name << "\" is not one of \"acoustic\", \"acoustic_vd\"");
  return Physics::acoustic;
}

/// The parameters of `p`, in the order gradients and models list them: {"vp"} or {"vp", "rho"}.
inline std::vector<std::string> parameter_names(Physics p) {
  return p == Physics::acoustic_vd ? std::vector<std::string>{"vp", "rho"} : std::vector<std::string>{"vp"};
}

/// The index of parameter `name` in parameter_names(p); an unknown name is an error naming it,
/// the physics and its parameters.
inline int parameter_index(Physics p, std::string const& name) {
  auto const names = parameter_names(p);
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  std::string list;
  for (auto const& n : names) list += (list.empty() ? "\"" : ", \"") + n + "\"";
  KSWEEP_REQUIRE(false, "parameter \"" << name << "\" is not one of " << to_string(p) << "'s: " << list);
  return -1;
}

}  // namespace ksweep::fwi
