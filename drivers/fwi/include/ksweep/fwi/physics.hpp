#pragma once
/// \file physics.hpp
/// The physics a Modeling or an Inversion runs, chosen at run time (the core's Propagator takes
/// it as a type: core::Acoustic, core::AcousticVd), and the names of its parameters.

#include <ksweep/base/error.hpp>
#include <ksweep/core/parameters.hpp>

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

/// One parameter of a physics: what the library's checks, messages and bounds need to know of it.
struct Parameter {
  char const* name;      ///< "vp", "rho": the name in Options::invert and in the output files
  char const* noun;      ///< "velocity", "density"
  char const* plural;    ///< "velocities", "densities"
  char const* units;     ///< "m/s", "kg/m^3"
  char const* min_key;   ///< the option of its lower bound: "vmin", "rho_min"
  char const* max_key;   ///< the option of its upper bound: "vmax", "rho_max"
  char const* step_key;  ///< the option of Adam's step for it: "lr", "lr_rho"
};

/// A parameter of the core's table (its name, words and units) with the option keys of its
/// bounds and of Adam's step.
inline Parameter with_keys(core::Parameter const& q, char const* min_key, char const* max_key, char const* step_key) {
  return {q.name, q.noun, q.plural, q.unit, min_key, max_key, step_key};
}

/// The parameters of `p`, in the order models, gradients and bounds list them (the core's
/// table, core/parameters.hpp): vp first (the velocity, which sets the time step's stability),
/// then the others.
inline std::vector<Parameter> const& physics_parameters(Physics p) {
  static std::vector<Parameter> const acoustic{with_keys(core::acoustic_parameters[0], "vmin", "vmax", "lr")};
  static std::vector<Parameter> const acoustic_vd{
      with_keys(core::acoustic_vd_parameters[0], "vmin", "vmax", "lr"),
      with_keys(core::acoustic_vd_parameters[1], "rho_min", "rho_max", "lr_rho")};
  return p == Physics::acoustic_vd ? acoustic_vd : acoustic;
}

/// The number of parameters of `p`.
inline int n_parameters(Physics p) { return static_cast<int>(physics_parameters(p).size()); }

/// The names of physics_parameters(p): {"vp"} or {"vp", "rho"}.
inline std::vector<std::string> parameter_names(Physics p) {
  std::vector<std::string> names;
  for (auto const& q : physics_parameters(p)) names.emplace_back(q.name);
  return names;
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
