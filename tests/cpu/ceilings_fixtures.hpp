// Ceiling entries built in code for the CPU tests of core/ceilings* (test_ceilings.cpp,
// test_ceilings_trust.cpp).
#pragma once

#include <string>
#include <string_view>

#include "core/ceilings/ceilings.hpp"

namespace aisp::testing {

// A measured ceiling with a fixed method, sample count and time.
inline CeilingEntry measured(std::string name, std::string group, std::string_view unit, double v) {
  CeilingEntry c;
  c.name = std::move(name);
  c.group = std::move(group);
  c.unit = std::string(unit);
  c.value = v;
  c.method = "test method";
  c.samples = 12;
  c.measured_utc = "2026-11-21T12:00:00Z";
  return c;
}

}  // namespace aisp::testing
