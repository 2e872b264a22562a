// flotilla/harness/log_tail.h
//
// The end of a server's log, for the error message of a server that failed to start and for test output.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/util.h"

namespace flotilla::harness {

//! The last `lines` lines of `text`, each ending in '\n' (empty lines at the end left out); a line longer than
//! `max_line` is cut there and marked " ...".
inline std::string lastLines(std::string_view text, size_t lines, size_t max_line = std::string::npos) {
  auto all = split(text, '\n');
  while (!all.empty() && all.back().empty()) {
    all.pop_back();
  }
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += all[i].size() > max_line ? all[i].substr(0, max_line) + " ..." : all[i];
    out += '\n';
  }
  return out;
}

}  // namespace flotilla::harness
