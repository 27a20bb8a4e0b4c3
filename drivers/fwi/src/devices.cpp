#include <ksweep/core/runtime.hpp>
#include <ksweep/fwi/devices.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <unistd.h>

namespace ksweep::fwi {

std::vector<RankDevice> rank_devices(comm::Communicator const& comm) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  // One line per rank: "local rank\tdevice id\thost\tdevice".
  std::string const mine = std::to_string(comm.local_rank()) + "\t" + std::to_string(core::device_id()) + "\t" + host +
                           "\t" + core::device_description();
  std::vector<RankDevice> out;
  auto const all = comm.gather(mine);
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::istringstream is(all[r]);
    std::string local, id;
    RankDevice d;
    d.rank = static_cast<int>(r);
    std::getline(is, local, '\t');
    std::getline(is, id, '\t');
    std::getline(is, d.host, '\t');
    std::getline(is, d.device);
    d.local_rank = std::atoi(local.c_str());
    d.device_id = std::atoi(id.c_str());
    out.push_back(d);
  }
  return out;
}

}  // namespace ksweep::fwi
