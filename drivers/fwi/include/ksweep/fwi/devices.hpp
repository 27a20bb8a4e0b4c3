#pragma once
/// \file devices.hpp
/// What each rank of a run computes on: its node, its rank there and its device (one GPU per
/// rank, chosen from the local rank: core/runtime.hpp), for reports such as `ksweep info` and
/// summary.json.

#include <ksweep/comm/communicator.hpp>

#include <string>
#include <vector>

namespace ksweep::fwi {

/// What one rank computes on.
struct RankDevice {
  int rank = 0, local_rank = 0, device_id = -1;  ///< device_id -1: the host
  std::string host, device;                      ///< node name; core::device_description()
};

/// Every rank's RankDevice, in rank order, on rank 0 (collective; empty on the other ranks).
std::vector<RankDevice> rank_devices(comm::Communicator const& comm);

}  // namespace ksweep::fwi
