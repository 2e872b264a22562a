// The CLI unit tests' way to run a command line in process: no stdin, stdout and stderr captured.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "flotilla/cli/cli.h"

namespace flotilla::cli {

//! What a command line did: its exit code and what it wrote.
struct Ran {
  int code;
  std::string out;
  std::string err;
};

inline Ran runCaptured(const std::vector<std::string>& args) {
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  int code = runCli(args, in, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace flotilla::cli
