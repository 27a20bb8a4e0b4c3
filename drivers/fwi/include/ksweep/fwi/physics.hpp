#pragma once
/// \file physics.hpp
/// The physics a Modeling or an Inversion runs, chosen at run time (the core's Propagator takes
/// it as a type: core::Acoustic, core::AcousticVd), and its parameters: both read from
/// core::physics_table.

#include <ksweep/base/error.hpp>
#include <ksweep/base/physics_table.hpp>

#include <string>
#include <vector>

namespace ksweep::fwi {

/// A physics: the index of its row of core::physics_table (its name, parameters and keys; the
/// same place in core::AllPhysics, the core's tags). The values named here are those the library
/// names in its own rules; a row added to the table is a physics without one.
enum class Physics {
  acoustic,     ///< constant-density acoustics: vp (m/s)
  acoustic_vd,  ///< variable-density acoustics: vp (m/s) and rho (kg/m^3)
};

/// The row of `p` in core::physics_table.
inline core::PhysicsRow const& physics_row(Physics p) {
  auto const i = static_cast<int>(p);
  KSWEEP_REQUIRE(i >= 0 && i < core::n_physics, "physics " << i << " is not a row of ksweep::core::physics_table");
  return core::physics_table[i];
}

/// Its name: "acoustic", "acoustic_vd".
inline char const* to_string(Physics p) { return physics_row(p).name; }

/// The physics named `name`; an unknown name is an error naming it and the choices.
inline Physics parse_physics(std::string const& name) {
  int const row = core::physics_row(name);
  if (row >= 0) return static_cast<Physics>(row);
  std::string choices;
  for (auto const& r : core::physics_table) choices += (choices.empty() ? "\"" : ", \"") + std::string(r.name) + "\"";
  KSWEEP_REQUIRE(false, "physics \"" << name << "\" is not one of " << choices);
  return Physics::acoustic;
}

/// One parameter of a physics (ksweep/base/physics_table.hpp): its name, words, unit, bound and the
/// option keys of its bounds and of Adam's step.
using Parameter = core::Parameter;

/// The parameters of `p`, in the order models, gradients and bounds list them: vp first (the
/// velocity, which sets the time step's stability), then the others.
inline std::vector<Parameter> const& physics_parameters(Physics p) {
  static std::vector<std::vector<Parameter>> const rows = [] {
    std::vector<std::vector<Parameter>> v;
    for (auto const& r : core::physics_table) v.emplace_back(r.begin(), r.end());
    return v;
  }();
  physics_row(p);  // a value outside the table is an error
  return rows[static_cast<std::size_t>(p)];
}

/// The number of parameters of `p`.
inline int n_parameters(Physics p) { return static_cast<int>(physics_row(p).n_parameters); }

/// The names of physics_parameters(p): {"vp"} or {"vp", "rho"}.
inline std::vector<std::string> parameter_names(Physics p) {
  std::vector<std::string> names;
  for (auto const& q : physics_parameters(p)) names.emplace_back(q.name);
  return names;
}

/// Whether `p` has the parameter `name` ("rho": its input, the density, is read).
inline bool has_parameter(Physics p, std::string const& name) {
  for (auto const& q : physics_parameters(p))
    if (name == q.name) return true;
  return false;
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
