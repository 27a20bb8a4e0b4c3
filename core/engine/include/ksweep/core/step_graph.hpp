#pragma once
/// \file step_graph.hpp
/// Runs of time steps replayed as CUDA graphs, so that a step's launches leave the host out of
/// the loop (a small shot's step is a few launches of a few microseconds each: the host's launch
/// rate, not the GPU, sets its pace).
///
/// StepGraphs::run(space, body, save) runs `body`, host code that launches a run of steps on
/// `space` and changes host state that `save()` captures (it returns a callable that puts that
/// state back: the propagator's wavefield parities). With graphs on (a CUDA execution space and
/// KSWEEP_CUDA_GRAPHS=1, or set_step_graphs(true)):
/// 1. the body runs once with its launches traced and not made (launch.hpp's LaunchTrace): the
///    host state moves on as if it had launched, and the fingerprint of what it would launch
///    (labels, bounds, every functor's bytes: its views' pointers and extents and its scalars)
///    is known;
/// 2. a graph captured from launches of that very fingerprint is launched (one cudaGraphLaunch);
/// 3. otherwise the host state is put back and the body runs again: the second time a
///    fingerprint comes, under stream capture on the instance's stream, the graph then
///    instantiated, kept (the few most recent) and launched; the first time, as plain launches
///    (a run on buffers that never come back pays no capture).
/// A graph is thus replayed only for launches byte for byte those it holds, on the buffers it
/// holds: the same bits as the launches (the device check compares both). A body that asks for
/// what a graph cannot hold (a reduction into a host value, a functor over the kernel-argument
/// limit), a trace that throws, or a capture that fails runs as plain launches from the state
/// put back. Graphs off (the default), other backends: body() itself.

#include <ksweep/base/environment.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <type_traits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace ksweep::core {

namespace impl {
/// -1: not read yet; 0 or 1: graphs off or on.
inline std::atomic<int>& step_graphs_setting() {
  static std::atomic<int> s{-1};
  return s;
}
}  // namespace impl

/// Whether runs of steps on CUDA go through graphs: set_step_graphs(), else KSWEEP_CUDA_GRAPHS
/// ("1": on; unset, empty or "0": off; any other value is an error naming it). Programs and the
/// Python module read it when they start (KokkosSession, the worker), so that a build without
/// CUDA refuses a wrong value too.
inline bool step_graphs() {
  int s = impl::step_graphs_setting().load();
  if (s < 0) {
    s = environment_switch("KSWEEP_CUDA_GRAPHS",
                           {"runs of steps on CUDA replayed as graphs", "launched one by one", "as 0"}) == 1
            ? 1
            : 0;
    impl::step_graphs_setting().store(s);
  }
  return s == 1;
}
inline void set_step_graphs(bool on) { impl::step_graphs_setting().store(on ? 1 : 0); }

/// Counts of a StepGraphs' runs (for benchmarks and the device check).
struct StepGraphCounts {
  std::size_t replays = 0;   ///< runs replayed from a kept graph
  std::size_t captures = 0;  ///< graphs captured and instantiated
  std::size_t plain = 0;     ///< runs launched as they are (graphs off, or not capturable)
  std::size_t failures = 0;  ///< captures that failed (then launched as they are)
};

template <class ExecSpace>
class StepGraphs {
 public:
  StepGraphs() = default;
  StepGraphs(StepGraphs const&) = delete;
  StepGraphs& operator=(StepGraphs const&) = delete;
  ~StepGraphs() { clear(); }

  /// Whether graphs can run on ExecSpace: CUDA's.
#if defined(KOKKOS_ENABLE_CUDA)
  static constexpr bool possible = std::is_same_v<ExecSpace, Kokkos::Cuda>;
#else
  static constexpr bool possible = false;
#endif
  /// Whether run() uses graphs: possible, and step_graphs() on.
  static bool enabled() { return possible && step_graphs(); }

  /// See the file comment. `save()` returns a callable that puts the host state back.
  template <class Body, class Save>
  void run(ExecSpace const& space, Body&& body, Save&& save) {
    if (!enabled() || m_failures >= max_failures) {
      ++m_counts.plain;
      body();
      return;
    }
    run_graph(space, body, save);
  }

  StepGraphCounts counts() const { return m_counts; }
  /// Releases the kept graphs.
  void clear() {
#if defined(KOKKOS_ENABLE_CUDA)
    for (auto& g : m_graphs) cudaGraphExecDestroy(g.exec);
#endif
    m_graphs.clear();
  }

 private:
  static constexpr int max_failures = 2;      // then this owner launches as it is
  static constexpr std::size_t max_kept = 4;  // graphs kept, the least recently used replaced
  static constexpr std::size_t max_seen = 8;  // fingerprints remembered before their capture

#if defined(KOKKOS_ENABLE_CUDA)
  struct Graph {
    std::uint64_t hash;
    std::size_t launches;
    cudaGraphExec_t exec;
    std::uint64_t used;
  };
  std::vector<Graph> m_graphs;
#else
  std::vector<int> m_graphs;
#endif
  std::vector<std::pair<std::uint64_t, std::size_t>> m_seen;  // fingerprints run once, oldest first
  StepGraphCounts m_counts;
  int m_failures = 0;
  std::uint64_t m_clock = 0;

  template <class Body, class Save>
  void run_graph([[maybe_unused]] ExecSpace const& space, Body& body, [[maybe_unused]] Save& save) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
      auto restore = save();
      ksweep::impl::LaunchTrace trace;
      trace.make = false;
      bool traced = true;
      try {
        ksweep::impl::ScopedTrace scope(&trace);
        body();
      } catch (...) {
        traced = false;  // run plainly below, where a real error is thrown again
      }
      if (!traced || !trace.capturable || trace.launches == 0) {
        restore();
        ++m_counts.plain;
        body();
        return;
      }
      std::uint64_t const key = trace.fingerprint();
      cudaStream_t const stream = space.cuda_stream();
      for (auto& g : m_graphs)
        if (g.hash == key && g.launches == trace.launches) {
          g.used = ++m_clock;
          if (cudaGraphLaunch(g.exec, stream) == cudaSuccess) {
            ++m_counts.replays;
            return;
          }
          (void)cudaGetLastError();
          restore();
          fail();
          body();
          return;
        }
      restore();
      // A fingerprint seen once before is captured; a new one launches as it is and is
      // remembered: runs that never come back (new buffers every call) pay no capture.
      for (auto it = m_seen.begin(); it != m_seen.end(); ++it)
        if (it->first == key && it->second == trace.launches) {
          m_seen.erase(it);
          capture(space, body, restore, trace);
          return;
        }
      if (m_seen.size() >= max_seen) m_seen.erase(m_seen.begin());
      m_seen.emplace_back(key, trace.launches);
      ++m_counts.plain;
      body();
      return;
    }
#endif
    ++m_counts.plain;
    body();
  }

#if defined(KOKKOS_ENABLE_CUDA)
  void fail() {
    ++m_failures;
    ++m_counts.failures;
    ++m_counts.plain;
  }

  // The body captured on the instance's stream from the state put back, then kept and launched;
  // anything failing: the state put back again and the body launched as it is.
  template <class Body, class Restore>
  void capture(Kokkos::Cuda const& space, Body& body, Restore& restore, ksweep::impl::LaunchTrace const& traced) {
    cudaStream_t const stream = space.cuda_stream();
    space.fence();  // nothing of before is pending on the stream when its capture starts
    (void)cudaGetLastError();
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
      (void)cudaGetLastError();
      fail();
      body();
      return;
    }
    ksweep::impl::LaunchTrace trace;  // launches made (captured) and traced again
    bool made = true;
    try {
      ksweep::impl::ScopedTrace scope(&trace);
      body();
    } catch (...) {
      made = false;
    }
    cudaGraph_t graph = nullptr;
    cudaError_t const ended = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    bool ok = made && ended == cudaSuccess && graph != nullptr && trace.fingerprint() == traced.fingerprint() &&
              trace.launches == traced.launches && trace.capturable;
#if CUDART_VERSION >= 12000
    if (ok) ok = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
#else
    if (ok) ok = cudaGraphInstantiate(&exec, graph, nullptr, nullptr, 0) == cudaSuccess;
#endif
    if (graph) cudaGraphDestroy(graph);
    if (ok) ok = cudaGraphLaunch(exec, stream) == cudaSuccess;
    if (!ok) {
      if (exec) cudaGraphExecDestroy(exec);
      (void)cudaGetLastError();
      restore();
      fail();
      body();
      return;
    }
    ++m_counts.captures;
    if (m_graphs.size() >= max_kept) {
      std::size_t oldest = 0;
      for (std::size_t i = 1; i < m_graphs.size(); ++i)
        if (m_graphs[i].used < m_graphs[oldest].used) oldest = i;
      cudaGraphExecDestroy(m_graphs[oldest].exec);
      m_graphs.erase(m_graphs.begin() + static_cast<std::ptrdiff_t>(oldest));
    }
    m_graphs.push_back({traced.fingerprint(), traced.launches, exec, ++m_clock});
  }
#endif
};

}  // namespace ksweep::core
