// The 3D variable-density modelling and inversion (see fwi_instantiate.hpp).
#include "fwi_instantiate.hpp"

namespace ksweep::fwi {
KSWEEP_FWI_INSTANTIATE(3, core::AcousticVd)
}  // namespace ksweep::fwi
