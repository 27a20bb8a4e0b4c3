// The 2D variable-density modelling and inversion (see fwi_instantiate.hpp).
#include "fwi_instantiate.hpp"

namespace ksweep::fwi {
KSWEEP_FWI_INSTANTIATE(2, core::AcousticVd)
}  // namespace ksweep::fwi
