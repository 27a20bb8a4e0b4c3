// The 3D constant-density modelling (both precisions) and inversion, every stencil order: one
// translation unit, so that the float propagator and gradient engine they share are compiled
// once (a file per dimension and physics, so that builds compile them in parallel).
#include "inversion_impl.hpp"
#include "modeling_impl.hpp"

namespace ksweep::fwi {

#define KSWEEP_FWI(Order)                                                                                          \
  template std::unique_ptr<Modeling<float>::Impl> make_modeling<float, Order, 3, core::Acoustic>(ModelingSetup);   \
  template std::unique_ptr<Modeling<double>::Impl> make_modeling<double, Order, 3, core::Acoustic>(ModelingSetup); \
  template std::unique_ptr<Inversion::Impl> make_inversion<Order, 3, core::Acoustic>(Problem, Options,             \
                                                                                     comm::Communicator const&);
KSWEEP_FWI(2)
KSWEEP_FWI(4)
KSWEEP_FWI(6)
KSWEEP_FWI(8)
#undef KSWEEP_FWI

}  // namespace ksweep::fwi
