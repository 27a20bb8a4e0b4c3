#include <ksweep/core/schedule.hpp>

namespace ksweep::core {

Schedule parse_schedule(std::string const& name) {
  auto const& names = schedule_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Schedule>(i);
  KSWEEP_REQUIRE(false, "propagator.schedule = \"" << name << "\" is not allowed (allowed: auto, batched, shots, cells)");
  return Schedule::automatic;
}

}  // namespace ksweep::core
