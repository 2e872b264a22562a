// Small pieces every benchmark prints the same way.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

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

//! A "Name:   value kB" field of a /proc file, in KiB (or the plain number); -1 when unreadable.
inline long procFieldKiB(const std::string& path, const std::string& field) {
  auto text = readFile(path);
  if (!text.ok()) {
    return -1;
  }
  for (const auto& line : split(*text, '\n')) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stol(trim(line.substr(field.size() + 1)));
    }
  }
  return -1;
}

//! A numeric field of /proc/<pid>/status: "VmRSS", "VmHWM" (KiB), "Threads"; -1 when unreadable.
inline long procStatusKiB(pid_t pid, const std::string& field) {
  return procFieldKiB("/proc/" + std::to_string(pid) + "/status", field);
}

//! A field of /proc/<pid>/smaps_rollup in KiB: "Pss" (the process's resident pages, each shared page divided among
//! the processes that map it, so a sum over processes counts a shared library once), "Rss"; -1 when unreadable.
inline long procSmapsRollupKiB(pid_t pid, const std::string& field) {
  return procFieldKiB("/proc/" + std::to_string(pid) + "/smaps_rollup", field);
}

//! utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat), in seconds; 0 when unreadable.
inline double procCpuSeconds(pid_t pid) {
  auto stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) {
    return 0;
  }
  // The fields after the command name (which may hold spaces) start after the last ')', with field 3.
  std::vector<std::string> fields = split(stat->substr(stat->rfind(')') + 2), ' ');
  if (fields.size() < 13) {
    return 0;
  }
  return (std::stod(fields[11]) + std::stod(fields[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace flotilla::bench
