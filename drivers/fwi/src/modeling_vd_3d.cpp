// The 3D variable-density modelling, both precisions and every stencil order (a file per dimension
// and physics, so that builds compile them in parallel).
#include "modeling_impl.hpp"

namespace ksweep::fwi {

#define KSWEEP_MODELING(Real, Order) \
  template std::unique_ptr<Modeling<Real>::Impl> make_modeling<Real, Order, 3, core::AcousticVd>(ModelingSetup);
KSWEEP_MODELING(float, 2)
KSWEEP_MODELING(float, 4)
KSWEEP_MODELING(float, 6)
KSWEEP_MODELING(float, 8)
KSWEEP_MODELING(double, 2)
KSWEEP_MODELING(double, 4)
KSWEEP_MODELING(double, 6)
KSWEEP_MODELING(double, 8)
#undef KSWEEP_MODELING

}  // namespace ksweep::fwi
