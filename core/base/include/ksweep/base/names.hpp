#pragma once
/// \file names.hpp
/// The registry of allowed names: for each enumerated configuration option, its key, the
/// allowed names in the order of the option's enum (propagator.order: of the orders) and one
/// line describing each. The configuration checks values with it, `ksweep info` prints it, the
/// README's configuration table must agree with it (tested), and the enums' parse and
/// to_string functions (storage::Dtype, storage::Location, storage::Strategy,
/// core::Schedule) read it, so a name is written once.

#include <ksweep/base/error.hpp>

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

namespace ksweep::names {

/// One allowed value of an option.
struct Choice {
  std::string_view name;
  std::string_view description;
};

/// An enumerated option: `key` = one of `choices` (in enum order).
struct Option {
  std::string_view key;  ///< "section.key", as in the configuration file
  Choice const* choices;
  std::size_t count;
  bool quoted;  ///< a string value (quoted in messages), or a number (propagator.order)

  constexpr std::size_t size() const { return count; }
  constexpr Choice const* begin() const { return choices; }
  constexpr Choice const* end() const { return choices + count; }
  constexpr Choice const& operator[](std::size_t i) const { return choices[i]; }
  /// The name of enum value `index`.
  constexpr std::string_view name(std::size_t index) const { return choices[index].name; }
  /// The index of `value` among the names, or -1.
  constexpr int find(std::string_view value) const {
    for (std::size_t i = 0; i < count; ++i)
      if (choices[i].name == value) return static_cast<int>(i);
    return -1;
  }
  /// The allowed names, comma-separated: "fp32, fp16, bf16, int8".
  std::string allowed() const {
    std::string s;
    for (std::size_t i = 0; i < count; ++i) (s += i ? ", " : "") += choices[i].name;
    return s;
  }
  /// Throws the error for a value that is not allowed: it names the key, the value and the
  /// allowed names.
  [[noreturn]] void reject(std::string const& value) const {
    std::string const shown = quoted ? "\"" + value + "\"" : value;
    KSWEEP_REQUIRE(false, key << " = " << shown << " is not allowed (allowed: " << allowed() << ")");
    throw Error("unreachable");  // KSWEEP_REQUIRE(false, ...) always throws
  }
  /// The index of `value` (the enum value); an error names the key, the value and the allowed
  /// names.
  int parse(std::string const& value) const {
    int const i = find(value);
    if (i < 0) reject(value);
    return i;
  }
};

namespace impl {
inline constexpr Choice orders[] = {
    {"2", "second-order centred differences (stencil radius 1)"},
    {"4", "fourth-order centred differences (stencil radius 2)"},
    {"6", "sixth-order centred differences (stencil radius 3)"},
    {"8", "eighth-order centred differences (stencil radius 4)"},
};
inline constexpr Choice schedules[] = {
    {"auto", "shots on host backends when the batch fills the threads evenly, batched otherwise and on devices"},
    {"batched", "one launch per time step over every shot of the batch"},
    {"shots", "host backends: each thread runs whole shots, many steps in cache"},
    {"cells", "the batched launches cell by cell, as device backends run them"},
};
inline constexpr Choice strategies[] = {
    {"full", "save the model cells and a stencil radius around them every step (exact reference)"},
    {"boundary", "save the ring of cells around the model; rebuild the rest by time reversal"},
};
inline constexpr Choice locations[] = {
    {"device", "in device memory"},
    {"host", "in host memory (page-locked where the backend has it, see storage.pinned)"},
    {"disk", "in a file under storage.disk_dir, written and read on a background thread"},
};
inline constexpr Choice dtypes[] = {
    {"fp32", "the compute precision, unchanged"},
    {"fp16", "IEEE binary16 of the values over one fp32 scale (max |v|) per block of 64"},
    {"bf16", "bfloat16, rounded to nearest even, no scale"},
    {"int8", "round(127 v / s) with one fp32 scale s = max |v| per block of 64"},
};
inline constexpr Choice optimizers[] = {
    {"adam", "Adam on random batches of fwi.batch shots"},
    {"lbfgs", "L-BFGS with a Wolfe line search on every shot (full batch)"},
};
}  // namespace impl

inline constexpr Option order{"propagator.order", impl::orders, std::size(impl::orders), false};
inline constexpr Option schedule{"propagator.schedule", impl::schedules, std::size(impl::schedules), true};
inline constexpr Option strategy{"storage.strategy", impl::strategies, std::size(impl::strategies), true};
inline constexpr Option location{"storage.location", impl::locations, std::size(impl::locations), true};
inline constexpr Option dtype{"storage.dtype", impl::dtypes, std::size(impl::dtypes), true};
inline constexpr Option optimizer{"fwi.optimizer", impl::optimizers, std::size(impl::optimizers), true};

/// Every option of the registry, in the order of the README's configuration table.
inline constexpr Option const* options[] = {&order, &schedule, &strategy, &location, &dtype, &optimizer};

/// The enum value named `value` of an option whose enum follows the registry's order.
template <class Enum>
Enum parse(Option const& option, std::string const& value) {
  return static_cast<Enum>(option.parse(value));
}
/// The name of an enum value of `option`.
template <class Enum>
std::string to_string(Option const& option, Enum e) {
  return std::string(option.name(static_cast<std::size_t>(e)));
}

}  // namespace ksweep::names
