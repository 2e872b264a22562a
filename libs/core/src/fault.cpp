#include "flotilla/core/fault.h"

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "flotilla/core/log.h"

namespace flotilla::fault {
namespace {

std::vector<std::string> parseList(std::string_view list) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string_view name =
        list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!name.empty() && name.front() == ' ') {
      name.remove_prefix(1);
    }
    while (!name.empty() && name.back() == ' ') {
      name.remove_suffix(1);
    }
    if (!name.empty()) {
      names.emplace_back(name);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    start = comma + 1;
  }
  return names;
}

const std::vector<std::string>& armedPoints() {
  // Read once, during the first call (a function-local static is initialised thread-safely); the environment is
  // not changed by the services after start-up, so the getenv race the check warns about cannot happen here.
  static const std::vector<std::string> points = [] {
    const char* value = std::getenv(std::string(kEnvVar).c_str());  // NOLINT(concurrency-mt-unsafe)
    return value == nullptr ? std::vector<std::string>() : parseList(value);
  }();
  return points;
}

}  // namespace

bool armed(std::string_view name) {
  for (const auto& point : armedPoints()) {
    if (point == name) {
      return true;
    }
  }
  return false;
}

void point(std::string_view name) {
  if (armedPoints().empty() || !armed(name)) {
    return;
  }
  log::warn("fault point reached: killing this process with SIGKILL", {{"fault_point", std::string(name)}});
  std::raise(SIGKILL);
}

}  // namespace flotilla::fault
