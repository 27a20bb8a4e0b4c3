#pragma once
/// \file schedule.hpp
/// How a batch of shots is ordered in time and over threads.
///
///  - `batched`: every time step is one launch over all shots of the batch (rows on hosts,
///    cells on devices), with the whole batch's fields streamed each step. The only schedule on
///    devices, where a batch fills the GPU.
///  - `shots`: host backends give each thread whole shots, and each shot runs many time steps
///    in a row while its fields (about 1-3 MB for a Marmousi shot) stay in the core's cache,
///    with no barrier between those steps. Gradients run in chunks of steps between which the
///    saved ring goes through the store's codec as a batch.
///  - `cells`: the batched launches cell by cell, one index per cell of every shot: the launches
///    of device backends (CUDA). On host backends it runs in the tests, so that the device
///    launches are checked on machines without a GPU.
///  - `automatic`: `shots` on host backends when the batch has at least as many shots as
///    threads and splits over them evenly enough (at least 3/4 of the threads busy on
///    average), `batched` otherwise and on devices.
///
/// Every schedule runs the same cell bodies in the same order within a shot, so their results
/// are the same bits (tested).

#include <ksweep/base/error.hpp>
#include <ksweep/base/names.hpp>

#include <string>

namespace ksweep::core {

enum class Schedule { automatic, batched, shots, cells };

/// Allowed names, in the order of the enum: names::schedule ("auto", "batched", "shots", "cells").
inline std::string to_string(Schedule s) { return names::to_string(names::schedule, s); }
/// The schedule named `name`; an error names the value and the allowed names.
Schedule parse_schedule(std::string const& name);

/// The schedule a new propagator starts with (`automatic` unless set otherwise): the test
/// programs run every physics test a second time with the `cells` schedule this way.
inline Schedule& default_schedule_ref() {
  static Schedule s = Schedule::automatic;
  return s;
}
inline Schedule default_schedule() { return default_schedule_ref(); }
inline void set_default_schedule(Schedule s) { default_schedule_ref() = s; }

/// Whether `automatic` picks `shots` for `n_shots` shots on `threads` host threads.
constexpr bool shots_schedule_pays(int n_shots, int threads) {
  if (threads < 1 || n_shots < threads) return false;
  int const rounds = (n_shots + threads - 1) / threads;
  return 4 * n_shots >= 3 * rounds * threads;
}

}  // namespace ksweep::core
