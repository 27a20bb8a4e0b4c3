#pragma once
/// \file error.hpp
/// Error reporting: every user-facing check throws ksweep::Error with the location and
/// the offending values, never asserts.

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

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

/// Bytes [i, i + result) of `s` form one well-formed UTF-8 character; 0 when they do not.
inline std::size_t utf8_char_length(std::string_view s, std::size_t i) {
  auto const b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char const c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  // No overlong forms, no surrogates, nothing above U+10FFFF.
  if ((c == 0xe0 && b(i + 1) < 0xa0) || (c == 0xed && b(i + 1) > 0x9f) || (c == 0xf0 && b(i + 1) < 0x90) ||
      (c == 0xf4 && b(i + 1) > 0x8f))
    return 0;
  return n;
}

/// The offset of the first byte of `s` that is not part of well-formed UTF-8 or is a NUL;
/// std::string_view::npos when there is none.
inline std::size_t first_bad_text_byte(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t const n = utf8_char_length(s, i);
    if (n == 0 || s[i] == '\0') return i;
    i += n;
  }
  return std::string_view::npos;
}

/// A user-supplied value as messages show it: control characters, NUL and bytes that are not
/// UTF-8 written as \xNN escapes, and a value longer than `limit` characters shortened in the
/// middle (its length said), so that no message grows with its input or is cut by a NUL.
inline std::string shown(std::string_view s, std::size_t limit = 200) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t const n = utf8_char_length(s, i);
    unsigned char const c = static_cast<unsigned char>(s[i]);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      static char const hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  if (out.size() <= limit) return out;
  // Cut at character boundaries (never inside a UTF-8 sequence).
  auto boundary = [&](std::size_t at) {
    while (at > 0 && (static_cast<unsigned char>(out[at]) & 0xc0) == 0x80) --at;
    return at;
  };
  std::size_t const head = boundary(limit * 2 / 3), tail = boundary(out.size() - limit / 4);
  return out.substr(0, head) + "...[" + std::to_string(s.size()) + " bytes in all]..." + out.substr(tail);
}

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
