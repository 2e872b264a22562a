// flotilla/core/process.h
//
// Child processes: the test harness starts real servers with them, and the bundler runs helm/kustomize.
// A Process is RAII: destroying it terminates the child (SIGTERM, then SIGKILL after a grace period).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "flotilla/core/result.h"

namespace flotilla {

struct ProcessOptions {
  std::vector<std::string> argv;           //!< argv[0] is the program (searched in PATH)
  std::map<std::string, std::string> env;  //!< added to (or overriding) the parent's environment
  std::string cwd;                         //!< empty: inherit
  std::string output_file;                 //!< stdout+stderr appended here; empty: inherit
  bool new_process_group = true;           //!< so kill() reaches the child's own children
  //! SIGKILL the child when the thread that started it exits, even by a crash (Linux PR_SET_PDEATHSIG), so a
  //! test that dies does not leave its servers running. Start such children from a long-lived thread.
  bool kill_with_parent = false;
};

class Process {
 public:
  static Result<Process> start(const ProcessOptions& options);

  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] bool running();
  //! Sends `signal` to the child (and its group).
  void signal(int signal);
  //! Waits for exit up to `timeout`; returns the exit code (128+signal if killed), nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  //! SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  pid_t pid_ = -1;
  bool group_ = false;
  std::optional<int> exit_code_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  //!< stdout
  std::string err;  //!< stderr
  bool timed_out = false;
};

struct CommandOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  //!< added to (or overriding) the parent's environment
  //! false: the child gets `env` only, nothing of the parent's environment (tools that must not see credentials).
  bool inherit_env = true;
  std::string cwd;
  std::string input;  //!< written to stdin
  std::chrono::milliseconds timeout = std::chrono::minutes(2);
  size_t max_output_bytes = 256u << 20;  //!< more output than this kills the command
};

//! Runs a command to completion, capturing stdout and stderr. Fails (kTransient) only if it could not be
//! started; a non-zero exit is reported in CommandResult for the caller to judge.
Result<CommandResult> runCommand(const CommandOptions& options);

}  // namespace flotilla
