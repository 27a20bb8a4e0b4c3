#pragma once
/// \file error.hpp
/// Error reporting: every user-facing check throws ksweep::Error with the location and
/// the offending values, never asserts.

#include <sstream>
#include <stdexcept>
#include <string>

namespace ksweep {

/// The exception type of every ksweep check on user input.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace impl {
[[noreturn]] inline void throw_error(char const* file, int line, std::string const& msg) {
  std::string f(file);
  auto const pos = f.find_last_of('/');
  if (pos != std::string::npos) f = f.substr(pos + 1);
  throw Error(msg + " [" + f + ":" + std::to_string(line) + "]");
}
}  // namespace impl

}  // namespace ksweep

/// Throws ksweep::Error with `msg` (a stream expression) when `cond` is false.
/// Usage: KSWEEP_REQUIRE(dt > 0, "time.dt = " << dt << " must be > 0");
#define KSWEEP_REQUIRE(cond, msg)                                                \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::ostringstream ksweep_require_os_;                                     \
      ksweep_require_os_ << msg;                                                 \
      ::ksweep::impl::throw_error(__FILE__, __LINE__, ksweep_require_os_.str()); \
    }                                                                            \
  } while (false)
