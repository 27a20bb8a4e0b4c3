#include <ksweep/comm/collective.hpp>

#include <cstdio>
#include <vector>

namespace ksweep::comm {

void settle(Communicator const& comm, std::string const& error) {
  if (comm.size() == 1) {
    if (!error.empty()) throw CollectiveError(error);
    return;
  }
  double flags[2] = {error.empty() ? 0.0 : 1.0, comm.is_root() && !error.empty() ? 1.0 : 0.0};
  comm.allreduce_sum(flags, 2);
  if (flags[0] == 0) return;
  if (comm.is_root() && flags[1] > 0) throw CollectiveError(error);
  if (!error.empty() && flags[1] == 0) {
    std::fprintf(stderr, "ksweep: error on rank %d: %s\n", comm.rank(), error.c_str());
    std::fflush(stderr);
  }
  throw CollectiveError("");
}

void agree_on(Communicator const& comm, std::string const& what, std::string const& text) {
  if (comm.size() == 1) return;
  std::vector<char> root(text.begin(), text.end());
  comm.broadcast(root);
  std::vector<double> differs(static_cast<std::size_t>(comm.size()), 0.0);
  differs[static_cast<std::size_t>(comm.rank())] = std::string(root.begin(), root.end()) == text ? 0.0 : 1.0;
  comm.allreduce_sum(differs.data(), differs.size());
  std::string ranks;
  int count = 0;
  for (int r = 0; r < comm.size(); ++r)
    if (differs[static_cast<std::size_t>(r)] != 0) {
      if (++count <= 8) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
  if (count == 0) return;
  if (count > 8) ranks += ", ...";
  throw CollectiveError("the ranks of this run disagree on " + what + ": rank(s) " + ranks + " of " +
                        std::to_string(comm.size()) +
                        " differ from rank 0; every rank must run the same ksweep command on the same configuration "
                        "and input files (start them with one mpirun command line, on a file system every node "
                        "sees alike)");
}

}  // namespace ksweep::comm
