// The 3D inversions, one per stencil order (a file per dimension, so that builds compile the
// two in parallel).
#include "inversion_impl.hpp"

namespace ksweep::fwi {

template <int Order, int Dim>
std::unique_ptr<Inversion::Impl> make_inversion(Problem problem, Options options, comm::Communicator const& comm) {
  return std::make_unique<impl::Run<Order, Dim>>(std::move(problem), std::move(options), comm);
}

template std::unique_ptr<Inversion::Impl> make_inversion<2, 3>(Problem, Options, comm::Communicator const&);
template std::unique_ptr<Inversion::Impl> make_inversion<4, 3>(Problem, Options, comm::Communicator const&);
template std::unique_ptr<Inversion::Impl> make_inversion<6, 3>(Problem, Options, comm::Communicator const&);
template std::unique_ptr<Inversion::Impl> make_inversion<8, 3>(Problem, Options, comm::Communicator const&);

}  // namespace ksweep::fwi
