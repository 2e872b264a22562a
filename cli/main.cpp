// flotilla: the command line of the hub (apply, get, describe, delete). Wiring only; see flotilla/cli/cli.h.
#include <iostream>
#include <string>
#include <vector>

#include "flotilla/cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return flotilla::cli::runCli(args, std::cin, std::cout, std::cerr);
}
