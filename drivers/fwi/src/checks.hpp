#pragma once
/// The checks of values every caller of the fwi library gets (the program, C++ callers and
/// Python alike): samples that must be finite, named by where they sit.

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>

namespace ksweep::fwi::detail {

/// Throws naming `what`, the first sample of `v[0, n)` that is not finite and how many are not;
/// `where(i)` says where sample i sits ("shot 2, time sample 17, receiver 4").
template <class T, class Where>
void require_finite(T const* v, std::size_t n, std::string const& what, Where where) {
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(static_cast<double>(v[i])) && bad++ == 0) first = i;
  KSWEEP_REQUIRE(bad == 0, what << " holds " << bad
                                << " sample(s) that are not finite (the first: " << static_cast<double>(v[first])
                                << " at " << where(first) << "); every sample must be a finite number");
}

/// What require_finite_on_device() finds: the values that are not finite, the first one's index
/// and value.
struct NotFinite {
  std::size_t count = 0, first = 0;
  double value = 0;
};

/// The values of `v[0, n)` in the default execution space's memory that are not finite, counted
/// on the device. (Apart from the message: nvcc's extended lambdas cannot sit in a function whose
/// template arguments are local types, such as a caller's `where` lambda.)
template <class T>
NotFinite not_finite_on_device(T const* v, std::size_t n) {
  using Space = Kokkos::DefaultExecutionSpace;
  Kokkos::View<T const*, Space::memory_space, Kokkos::MemoryUnmanaged> const x(v, n);
  NotFinite r;
  r.first = n;
  Space const space;
  launch_reduce(
      "ksweep::fwi::count_not_finite", Kokkos::RangePolicy<Space>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & b) {
        double const a = static_cast<double>(x(i));
        b += (a == a && a - a == 0) ? 0 : 1;  // NaN fails the first test, infinity the second
      },
      Kokkos::Sum<std::size_t>(r.count));
  if (r.count == 0) return r;
  launch_reduce(
      "ksweep::fwi::first_not_finite", Kokkos::RangePolicy<Space>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & f) {
        double const a = static_cast<double>(x(i));
        if (!(a == a && a - a == 0) && i < f) f = i;
      },
      Kokkos::Min<std::size_t>(r.first));
  T value{};
  Kokkos::deep_copy(space, Kokkos::View<T, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&value),
                    Kokkos::subview(x, r.first));
  space.fence();
  r.value = static_cast<double>(value);
  return r;
}

/// require_finite() of `n` values at `v` in the default execution space's memory (the caller's
/// device array, Modeling::set_arrays): the same test and message, counted on the device.
template <class T, class Where>
void require_finite_on_device(T const* v, std::size_t n, std::string const& what, Where where) {
  auto const r = not_finite_on_device(v, n);
  KSWEEP_REQUIRE(r.count == 0, what << " holds " << r.count << " sample(s) that are not finite (the first: " << r.value
                                    << " at " << where(r.first) << "); every sample must be a finite number");
}

/// require_finite() on the host or (`on_device`) require_finite_on_device().
template <class T, class Where>
void require_finite(bool on_device, T const* v, std::size_t n, std::string const& what, Where where) {
  if (on_device) require_finite_on_device(v, n, what, where);
  else require_finite(v, n, what, where);
}

/// "shot s, time sample t, receiver r" of sample i of records [shot][nt][receiver].
inline std::string record_position(std::size_t i, int nt, int receivers) {
  auto const per_shot = static_cast<std::size_t>(nt) * static_cast<std::size_t>(receivers);
  std::ostringstream os;
  os << "shot " << i / per_shot << ", time sample " << (i % per_shot) / static_cast<std::size_t>(receivers)
     << ", receiver " << i % static_cast<std::size_t>(receivers);
  return os.str();
}

/// "shot s, source k, time sample t" of sample i of wavelets [shot][source][nt].
inline std::string wavelet_position(std::size_t i, int nt, int sources) {
  auto const per_shot = static_cast<std::size_t>(nt) * static_cast<std::size_t>(sources);
  std::ostringstream os;
  os << "shot " << i / per_shot << ", source " << (i % per_shot) / static_cast<std::size_t>(nt) << ", time sample "
     << i % static_cast<std::size_t>(nt);
  return os.str();
}

/// "sample i" (a trace, a model's cells).
inline std::string sample_position(std::size_t i) { return "sample " + std::to_string(i); }
inline std::string cell_position(std::size_t i) { return "cell " + std::to_string(i); }

}  // namespace ksweep::fwi::detail
