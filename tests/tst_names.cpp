// The registry of allowed names (ksweep/base/names.hpp): the errors, and the enums and dispatchers
// that follow its order. (The configuration keys that take these names, and the README's table of
// them, are checked against the registry in tst_io.cpp.)

#include <ksweep/base/environment.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/storage/codec.hpp>
#include <ksweep/storage/step_store.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <utility>

namespace {

using namespace ksweep;

TEST(names, registry_is_well_formed) {
  std::set<std::string> keys;
  for (auto const* option : names::options) {
    EXPECT_TRUE(keys.insert(std::string(option->key)).second) << option->key;
    ASSERT_GE(option->size(), 2u) << option->key;
    std::set<std::string> seen;
    for (auto const& c : *option) {
      EXPECT_TRUE(seen.insert(std::string(c.name)).second) << option->key << ": " << c.name << " twice";
      EXPECT_FALSE(c.description.empty()) << option->key << ": " << c.name;
      EXPECT_EQ(c.description.find('\n'), std::string_view::npos) << option->key << ": " << c.name;
    }
  }
  EXPECT_EQ(keys.size(), 6u);
}

std::string error_of(names::Option const& option, std::string const& value) {
  try {
    option.parse(value);
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

TEST(names, parse_errors_name_key_value_and_allowed) {
  EXPECT_NE(
      error_of(names::dtype, "fp8").find("storage.dtype = \"fp8\" is not allowed (allowed: fp32, fp16, bf16, int8)"),
      std::string::npos);
  EXPECT_NE(
      error_of(names::location, "gpu").find("storage.location = \"gpu\" is not allowed (allowed: device, host, disk)"),
      std::string::npos);
  EXPECT_NE(
      error_of(names::strategy, "ckpt").find("storage.strategy = \"ckpt\" is not allowed (allowed: full, boundary)"),
      std::string::npos);
  EXPECT_NE(error_of(names::schedule, "rows")
                .find("propagator.schedule = \"rows\" is not allowed (allowed: auto, batched, shots, cells)"),
            std::string::npos);
  EXPECT_NE(error_of(names::order, "5").find("propagator.order = 5 is not allowed (allowed: 2, 4, 6, 8)"),
            std::string::npos);
  for (auto const* option : names::options) {
    for (std::size_t i = 0; i < option->size(); ++i)
      EXPECT_EQ(option->parse(std::string(option->name(i))), static_cast<int>(i));
    EXPECT_NE(error_of(*option, "").find(std::string(option->key)), std::string::npos);
  }
}

TEST(names, enums_follow_the_registry) {
  for (std::size_t i = 0; i < names::dtype.size(); ++i) {
    std::string const name(names::dtype.name(i));
    auto const d = storage::parse_dtype(name);
    EXPECT_EQ(static_cast<std::size_t>(d), i);
    EXPECT_EQ(storage::to_string(d), name);
    EXPECT_EQ(storage::dispatch_dtype(d, [](auto codec) { return decltype(codec)::dtype; }), d) << name;
  }
  for (std::size_t i = 0; i < names::location.size(); ++i) {
    std::string const name(names::location.name(i));
    EXPECT_EQ(static_cast<std::size_t>(storage::parse_location(name)), i);
    EXPECT_EQ(storage::to_string(storage::parse_location(name)), name);
  }
  EXPECT_EQ(storage::parse_strategy("full"), storage::Strategy::full);
  EXPECT_EQ(storage::parse_strategy("boundary"), storage::Strategy::boundary);
  EXPECT_EQ(storage::to_string(storage::Strategy::full), "full");
  EXPECT_EQ(storage::to_string(storage::Strategy::boundary), "boundary");
  for (auto s : {core::Schedule::automatic, core::Schedule::batched, core::Schedule::shots, core::Schedule::cells})
    EXPECT_EQ(core::parse_schedule(core::to_string(s)), s);
  EXPECT_EQ(core::to_string(core::Schedule::automatic), "auto");
  EXPECT_EQ(core::to_string(core::Schedule::cells), "cells");
  for (std::size_t i = 0; i < names::order.size(); ++i) {
    int const order = std::stoi(std::string(names::order.name(i)));
    EXPECT_EQ(core::dispatch_order(order, [](auto o) { return decltype(o)::value; }), order);
  }
}

// The run's on/off switches (KSWEEP_CUDA_GRAPHS, KSWEEP_GPU_AWARE_MPI, KSWEEP_OVERLAP) share one
// parser: "1", "0", unset or empty; anything else is refused naming the variable, the value and
// the three states.
TEST(names, environment_switch_takes_1_0_or_nothing) {
  char const* name = "KSWEEP_TEST_SWITCH";
  SwitchMeaning const m{"on words", "off words", "unset words"};
  ::unsetenv(name);
  EXPECT_EQ(environment_switch(name, m), -1);
  for (auto const& [v, want] : {std::pair<char const*, int>{"", -1}, {"1", 1}, {"0", 0}}) {
    ::setenv(name, v, 1);
    EXPECT_EQ(environment_switch(name, m), want) << "'" << v << "'";
  }
  for (char const* bad : {"yes", "on", "true", "01", " 1", "1 ", "2", "-1"}) {
    ::setenv(name, bad, 1);
    try {
      (void)environment_switch(name, m);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (Error const& e) {
      std::string const want =
          std::string(name) + "='" + bad + "' is not allowed (allowed: 1, on words; 0, off words; unset, unset words)";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  ::unsetenv(name);
}

}  // namespace
