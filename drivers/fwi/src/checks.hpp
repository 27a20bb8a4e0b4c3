#pragma once
/// The checks of values every caller of the fwi library gets (the program, C++ callers and
/// Python alike): samples that must be finite, named by where they sit.

#include <ksweep/base/error.hpp>

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
