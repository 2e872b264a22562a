// Small pieces every benchmark prints the same way.
#pragma once

#include <string>
#include <thread>

#include "flotilla/core/util.h"

namespace flotilla::bench {

//! What the machine looked like while measuring, read at run time (never a hard-coded description): cores and the
//! 1-minute load average when called (call it after the measurement, so the load includes it).
inline std::string machineLoad() {
  auto loadavg = readFile("/proc/loadavg");
  const std::string load = loadavg.ok() ? loadavg->substr(0, loadavg->find(' ')) : "?";
  return std::to_string(std::thread::hardware_concurrency()) + " cores, 1-minute load average " + load +
         " at the end of the run";
}

}  // namespace flotilla::bench
