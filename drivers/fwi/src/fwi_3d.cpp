// The 3D constant-density modelling and inversion (see fwi_instantiate.hpp).
#include "fwi_instantiate.hpp"

namespace ksweep::fwi {
KSWEEP_FWI_INSTANTIATE(3, core::Acoustic)
}  // namespace ksweep::fwi
