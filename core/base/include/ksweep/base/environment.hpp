#pragma once
/// \file environment.hpp
/// On/off switches read from the environment (KSWEEP_CUDA_GRAPHS, KSWEEP_OVERLAP,
/// KSWEEP_GPU_AWARE_MPI): one parser and one message for all of them.

#include <ksweep/base/error.hpp>

#include <cstdlib>
#include <cstring>

namespace ksweep {

/// What a switch's three states do, in the words of its error message.
struct SwitchMeaning {
  char const* on;     ///< "1"
  char const* off;    ///< "0"
  char const* unset;  ///< unset or empty
};

/// The on/off switch `name` in the environment: 1 for "1", 0 for "0", -1 when it is unset or
/// empty. Any other value throws Error "NAME='value' is not allowed (allowed: 1, <on>; 0, <off>;
/// unset, <unset>)".
inline int environment_switch(char const* name, SwitchMeaning const& meaning) {
  char const* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  if (std::strcmp(v, "1") == 0) return 1;
  if (std::strcmp(v, "0") == 0) return 0;
  KSWEEP_REQUIRE(false, name << "='" << v << "' is not allowed (allowed: 1, " << meaning.on << "; 0, " << meaning.off
                             << "; unset, " << meaning.unset << ")");
  return -1;
}

}  // namespace ksweep
