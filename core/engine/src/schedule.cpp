#include <ksweep/core/schedule.hpp>

namespace ksweep::core {

Schedule parse_schedule(std::string const& name) { return names::parse<Schedule>(names::schedule, name); }

}  // namespace ksweep::core
