#pragma once
/// \file launch.hpp
/// The one place the library launches kernels: `launch_for` and `launch_reduce` wrap
/// Kokkos::parallel_for and Kokkos::parallel_reduce so that on host backends every call of the
/// functor runs with subnormals flushed (fp_env.hpp); on devices they are the Kokkos calls
/// themselves (device code is compiled with flush-to-zero). Every kernel of core/, storage/ and
/// drivers/ goes through them (a test of the sources checks it), so that no kernel computes
/// with subnormals that another kernel, or another schedule, would flush.
///
/// Both are asynchronous on the policy's execution space instance, as the Kokkos calls are
/// (launch_reduce into a host scalar fences, as Kokkos does).
///
/// Device launches ask for Kokkos' light-weight launch (impl::light): the functor travels as a
/// kernel argument (up to 4 KiB; larger ones through device memory). Kokkos' default for
/// functors of 512 B to 32 KiB, which most of ksweep's are, copies them to the GPU's constant
/// memory and makes the host wait until the previous such kernel has finished before each
/// launch: the launches of a time step then run one after another with the host in the loop
/// (measured on an H200: ~17 us per launch for kernels of a few microseconds).

///
/// A LaunchTrace made active on the calling thread (ScopedTrace) sees every launch: it folds the
/// label, the policy's bounds and the functor's bytes (its views' pointers and extents, its
/// scalars) into a fingerprint, and with `make` false the launches are traced and not made.
/// step_graph.hpp replays a run of steps as a CUDA graph when its fingerprint is one it captured.

#include <ksweep/base/fp_env.hpp>

#include <Kokkos_Core.hpp>

#define XXH_INLINE_ALL  // xxhash.h's functions inline here: no library to link
#if defined(__AVX512F__) && !defined(XXH_VECTOR)
// AVX2 rather than xxhash's AVX-512 path, which g++ 12 warns about (-Wmaybe-uninitialized inside
// its own intrinsics); a trace hashes a few hundred bytes at a time.
#define XXH_VECTOR XXH_AVX2
#endif
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ksweep {

namespace impl {

/// In its scope, views copied on the calling thread are not reference counted: the copies carry
/// no count (and release none), as Kokkos copies a functor for a launch. For the functors a time
/// step builds from views that outlive them (the propagator's levels, profiles and points, the
/// caller's records): a step's kernels hold tens of views, and counting each copy in and out
/// (two atomic updates per view per copy) would be most of the host's time in a step.
/// Nothing may be allocated in its scope (a view allocated there would never be freed).
class UncountedViews {
 public:
  UncountedViews() : m_was(Record::tracking_enabled()) { Record::tracking_disable(); }
  ~UncountedViews() {
    if (m_was) Record::tracking_enable();
  }
  UncountedViews(UncountedViews const&) = delete;
  UncountedViews& operator=(UncountedViews const&) = delete;

 private:
  using Record = Kokkos::Impl::SharedAllocationRecord<void, void>;
  bool m_was;
};

/// The launches of a piece of host code, as a fingerprint (see the file comment): XXH3's 64-bit
/// hash of everything added, in order.
struct LaunchTrace {
  bool make = true;        ///< false: launches are traced, not made
  bool capturable = true;  ///< false once a launch a CUDA graph cannot hold was asked for
  std::size_t launches = 0;
  /// When set, each launch's label and the fingerprint after it (to find where two runs part).
  std::vector<std::pair<std::string, std::uint64_t>>* log = nullptr;

  LaunchTrace() {
    XXH3_INITSTATE(&m_state);
    XXH3_64bits_reset(&m_state);
  }
  /// The fingerprint of what was added so far.
  std::uint64_t fingerprint() const { return XXH3_64bits_digest(&m_state); }
  /// Adds n bytes.
  void add(void const* p, std::size_t n) { XXH3_64bits_update(&m_state, p, n); }
  /// Adds a label and its length (so that two labels cannot run into each other).
  void add(char const* label) {
    std::size_t const n = std::strlen(label);
    add(label, n);
    add_value(static_cast<std::uint64_t>(n));
  }
  /// Adds an object's bytes, read from a copy of it made in zeroed memory: a copy constructor
  /// writes the members, not the padding between them, whose bytes in the object itself are
  /// whatever its stack slot held (two runs of the same launches would part there; the step
  /// functors hold none). The copy is made with Kokkos' reference counting off (as Kokkos copies
  /// a functor for a launch), so it costs no atomic per view. A compiler that copies padding
  /// along with the members puts it in the fingerprint: then fingerprints may differ where the
  /// launches do not, which costs a replay, never a wrong one.
  template <class T>
  void add_object(T const& v) {
    alignas(T) unsigned char b[sizeof(T)];
    std::memset(b, 0, sizeof(T));
    T* copy;
    {
      UncountedViews const uncounted;
      copy = ::new (static_cast<void*>(b)) T(v);
    }
    add(b, sizeof(T));
    copy->~T();
  }
  template <class T>
  void add_value(T const& v) {
    static_assert(std::is_trivially_copyable_v<T>, "LaunchTrace::add_value: a plain value");
    add(&v, sizeof v);
  }

 private:
  XXH3_state_t m_state;
};

/// The calling thread's active trace (null: none).
inline thread_local LaunchTrace* active_trace = nullptr;

/// Makes `t` the calling thread's active trace for its scope (the one before it after).
class ScopedTrace {
 public:
  explicit ScopedTrace(LaunchTrace* t) : m_before(active_trace) { active_trace = t; }
  ~ScopedTrace() { active_trace = m_before; }
  ScopedTrace(ScopedTrace const&) = delete;
  ScopedTrace& operator=(ScopedTrace const&) = delete;

 private:
  LaunchTrace* m_before;
};

// The bounds of a policy, folded into a trace.
template <class ExecSpace, class... Traits>
void trace_policy(LaunchTrace& t, Kokkos::RangePolicy<ExecSpace, Traits...> const& p) {
  t.add_value(static_cast<std::int64_t>(p.begin()));
  t.add_value(static_cast<std::int64_t>(p.end()));
}
template <class ExecSpace, class... Traits>
void trace_policy(LaunchTrace& t, Kokkos::MDRangePolicy<ExecSpace, Traits...> const& p) {
  for (std::size_t i = 0; i < p.m_lower.size(); ++i) {
    t.add_value(static_cast<std::int64_t>(p.m_lower[i]));
    t.add_value(static_cast<std::int64_t>(p.m_upper[i]));
    t.add_value(static_cast<std::int64_t>(p.m_tile[i]));
  }
}
template <class ExecSpace, class... Traits>
void trace_policy(LaunchTrace& t, Kokkos::TeamPolicy<ExecSpace, Traits...> const& p) {
  t.add_value(static_cast<std::int64_t>(p.league_size()));
  t.add_value(static_cast<std::int64_t>(p.team_size()));
  t.add_value(static_cast<std::int64_t>(p.scratch_size(0)));
  t.add_value(static_cast<std::int64_t>(p.scratch_size(1)));
}

/// Traces a launch on the active trace, if any: true when the launch is to be made.
template <class Policy, class Functor>
bool trace_launch(std::string const& label, Policy const& policy, Functor const& f) {
  LaunchTrace* const t = active_trace;
  if (!t) return true;
  ++t->launches;
  t->add(label.c_str());
  trace_policy(*t, policy);
  t->add_value(static_cast<std::uint64_t>(sizeof(Functor)));
  t->add_object(f);  // the functor's views (pointers, extents) and scalars
  if (t->log) t->log->emplace_back(label, t->fingerprint());
  // A device functor travels as a kernel argument up to 4 KiB (with its policy); a larger one
  // goes through a buffer Kokkos shares between launches, which a graph cannot replay.
  if (sizeof(Functor) + sizeof(Policy) + 256 > 4096) t->capturable = false;
  return t->make;
}

template <class Policy>
inline constexpr bool launches_on_host =
    Kokkos::SpaceAccessibility<typename Policy::execution_space, Kokkos::HostSpace>::accessible;

/// The policy with Kokkos' light-weight launch hint (see the file comment).
template <class Policy>
auto light(Policy const& policy) {
  return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintLightWeight);
}

/// A functor called under FlushDenormals (host backends). The guard is cheap when the mode is
/// already set (one read of the control register), so nested units of work cost little.
template <class Functor>
struct UnderFlush {
  Functor m_f;
  bool m_flush;
  template <class... Args>
  void operator()(Args&&... args) const {
    fp::FlushDenormals guard(m_flush);
    m_f(std::forward<Args>(args)...);
  }
};

/// The reduction form over a 1D range: the functor is called as f(i, v). Its call operator is
/// not a template, so that Kokkos can read the value type from it (Kokkos 3.4 requires that even
/// with a reducer).
template <class Functor, class Index, class Value>
struct UnderFlushReduce {
  Functor m_f;
  bool m_flush;
  void operator()(Index i, Value& v) const {
    fp::FlushDenormals guard(m_flush);
    m_f(i, v);
  }
};

/// A 1D range on a host backend in chunks of consecutive indices, the mode set once per chunk
/// (a mode switch costs a few tens of cycles; some kernels do a few per index).
template <class Functor, class Index, class Tag>
struct ChunksUnderFlush {
  Functor m_f;
  Index m_begin, m_end, m_chunk;
  bool m_flush;
  void operator()(Index c) const {
    fp::FlushDenormals guard(m_flush);
    Index const i0 = m_begin + c * m_chunk, i1 = i0 + m_chunk < m_end ? i0 + m_chunk : m_end;
    for (Index i = i0; i < i1; ++i) {
      if constexpr (std::is_void_v<Tag>) {
        m_f(i);
      } else {
        m_f(Tag{}, i);
      }
    }
  }
};

}  // namespace impl

/// Kokkos::parallel_for(label, policy, f) over a 1D range: on host backends with a static
/// schedule, in about four chunks of consecutive indices per thread, each under one
/// FlushDenormals (indices are independent, so the chunking does not change results); with a
/// dynamic schedule, one guard per index (the `shots` schedule: an index is a whole shot).
template <class ExecSpace, class... Traits, class Functor>
void launch_for(std::string const& label, Kokkos::RangePolicy<ExecSpace, Traits...> const& policy, Functor const& f) {
  using Policy = Kokkos::RangePolicy<ExecSpace, Traits...>;
  using Index = typename Policy::member_type;
  constexpr bool dynamic = std::is_same_v<typename Policy::schedule_type::type, Kokkos::Dynamic>;
  if (!impl::trace_launch(label, policy, f)) return;
  if constexpr (impl::launches_on_host<Policy> && !dynamic) {
    Index const n = policy.end() > policy.begin() ? policy.end() - policy.begin() : 0;
    Index const parts = static_cast<Index>(4 * policy.space().concurrency());
    Index const chunk = n > 0 ? n / parts + (n % parts != 0) : 1;
    Index const chunks = (n + chunk - 1) / chunk;
    using execution_space = typename Policy::execution_space;
    Kokkos::parallel_for(label,
                         Kokkos::RangePolicy<execution_space, Kokkos::IndexType<Index>>(policy.space(), 0, chunks),
                         impl::ChunksUnderFlush<Functor, Index, typename Policy::work_tag>{
                             f, policy.begin(), policy.end(), chunk, fp::flush_denormals()});
  } else if constexpr (impl::launches_on_host<Policy>) {
    Kokkos::parallel_for(label, policy, impl::UnderFlush<Functor>{f, fp::flush_denormals()});
  } else {
    Kokkos::parallel_for(label, impl::light(policy), f);
  }
}

/// Kokkos::parallel_for(label, policy, f) for other policies (multidimensional ranges, teams),
/// with subnormals flushed on host backends, one guard per call of the functor.
template <class Policy, class Functor>
void launch_for(std::string const& label, Policy const& policy, Functor const& f) {
  if (!impl::trace_launch(label, policy, f)) return;
  if constexpr (impl::launches_on_host<Policy>) {
    Kokkos::parallel_for(label, policy, impl::UnderFlush<Functor>{f, fp::flush_denormals()});
  } else {
    Kokkos::parallel_for(label, impl::light(policy), f);
  }
}

/// Kokkos::parallel_reduce(label, policy, f, reducer) over a 1D range, with subnormals flushed on
/// host backends. Always with a reducer (Kokkos::Sum, Min, Max, MinMax, ...), which gives the
/// value type.
template <class ExecSpace, class... Traits, class Functor, class Reducer>
void launch_reduce(std::string const& label, Kokkos::RangePolicy<ExecSpace, Traits...> const& policy, Functor const& f,
                   Reducer const& reducer) {
  static_assert(Kokkos::is_reducer<Reducer>::value,
                "ksweep::launch_reduce: pass a Kokkos reducer (Kokkos::Sum<T>(x), Kokkos::Max<T>(x), ...)");
  using Policy = Kokkos::RangePolicy<ExecSpace, Traits...>;
  // A reduction into a host value waits for the device: it ends a trace's graph, and is made.
  if (impl::LaunchTrace* const t = impl::active_trace) t->capturable = false;
  if constexpr (impl::launches_on_host<Policy>) {
    using reduce_functor = impl::UnderFlushReduce<Functor, typename Policy::member_type, typename Reducer::value_type>;
    Kokkos::parallel_reduce(label, policy, reduce_functor{f, fp::flush_denormals()}, reducer);
  } else {
    Kokkos::parallel_reduce(label, impl::light(policy), f, reducer);
  }
}

}  // namespace ksweep
