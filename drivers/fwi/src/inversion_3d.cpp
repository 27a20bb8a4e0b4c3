// The 3D constant-density inversions, one per stencil order (a file per dimension and physics, so
// that builds compile them in parallel).
#include "inversion_impl.hpp"

namespace ksweep::fwi {

#define KSWEEP_INVERSION(Order)                                                                        \
  template std::unique_ptr<Inversion::Impl> make_inversion<Order, 3, core::Acoustic>(Problem, Options, \
                                                                                     comm::Communicator const&);
KSWEEP_INVERSION(2)
KSWEEP_INVERSION(4)
KSWEEP_INVERSION(6)
KSWEEP_INVERSION(8)
#undef KSWEEP_INVERSION

}  // namespace ksweep::fwi
