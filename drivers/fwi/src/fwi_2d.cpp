// The 2D constant-density modelling and inversion (see fwi_instantiate.hpp).
#include "fwi_instantiate.hpp"

namespace ksweep::fwi {
KSWEEP_FWI_INSTANTIATE(2, core::Acoustic)
}  // namespace ksweep::fwi
