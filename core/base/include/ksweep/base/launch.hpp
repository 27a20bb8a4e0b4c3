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

#include <ksweep/base/fp_env.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <type_traits>
#include <utility>

namespace ksweep {

namespace impl {

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
  if constexpr (impl::launches_on_host<Policy>) {
    using reduce_functor = impl::UnderFlushReduce<Functor, typename Policy::member_type, typename Reducer::value_type>;
    Kokkos::parallel_reduce(label, policy, reduce_functor{f, fp::flush_denormals()}, reducer);
  } else {
    Kokkos::parallel_reduce(label, impl::light(policy), f, reducer);
  }
}

}  // namespace ksweep
