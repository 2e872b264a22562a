#include "flotilla/core/process.h"

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flotilla/core/errno_text.h"

extern char** environ;

namespace flotilla {
namespace {

std::vector<std::string> buildEnvironment(const std::map<std::string, std::string>& overrides, bool inherit = true) {
  std::map<std::string, std::string> merged;
  for (char** entry = environ; inherit && *entry != nullptr; ++entry) {
    std::string item(*entry);
    auto eq = item.find('=');
    if (eq != std::string::npos) {
      merged[item.substr(0, eq)] = item.substr(eq + 1);
    }
  }
  for (const auto& [key, value] : overrides) {
    merged[key] = value;
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [key, value] : merged) {
    std::string entry = key;
    entry += '=';
    entry += value;
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<char*> cStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

int decodeStatus(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return -1;
}

// Runs in the forked child before exec: only async-signal-safe calls.
[[noreturn]] void execChild(char** argv, char** envp, const char* cwd, int out_fd, int err_fd, int in_fd, bool group,
                            pid_t die_with = 0) {
  if (die_with != 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != die_with) {
      _exit(125);  // the parent died before prctl took effect
    }
  }
  if (group) {
    setpgid(0, 0);
  }
  if (in_fd >= 0) {
    dup2(in_fd, STDIN_FILENO);
  }
  if (out_fd >= 0) {
    dup2(out_fd, STDOUT_FILENO);
  }
  if (err_fd >= 0) {
    dup2(err_fd, STDERR_FILENO);
  }
  if (cwd != nullptr && chdir(cwd) != 0) {
    _exit(126);
  }
  // The child must not inherit our signal mask (tests and services block signals in some threads).
  sigset_t empty;
  sigemptyset(&empty);
  pthread_sigmask(SIG_SETMASK, &empty, nullptr);
  execvpe(argv[0], argv, envp);
  _exit(127);
}

}  // namespace

Result<Process> Process::start(const ProcessOptions& options) {
  if (options.argv.empty()) {
    return fail(ErrorKind::kInvalid, "no program given");
  }
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = buildEnvironment(options.env);
  auto argv = cStrings(args);
  auto envp = cStrings(env);
  int out_fd = -1;
  if (!options.output_file.empty()) {
    out_fd = ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      return fail(ErrorKind::kPermanent, "cannot open " + options.output_file + ": " + errnoText(errno));
    }
  }
  int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t parent = options.kill_with_parent ? getpid() : 0;
  pid_t pid = fork();
  if (pid < 0) {
    return fail(ErrorKind::kTransient, std::string("fork failed: ") + errnoText(errno));
  }
  if (pid == 0) {
    execChild(argv.data(), envp.data(), options.cwd.empty() ? nullptr : options.cwd.c_str(), out_fd, out_fd, null_in,
              options.new_process_group, parent);
  }
  if (out_fd >= 0) {
    ::close(out_fd);
  }
  if (null_in >= 0) {
    ::close(null_in);
  }
  if (options.new_process_group) {
    setpgid(pid, pid);  // also done in the child; whichever runs first wins, both are harmless
  }
  Process process;
  process.pid_ = pid;
  process.group_ = options.new_process_group;
  return process;
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), group_(other.group_), exit_code_(other.exit_code_) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !exit_code_) {
      stop();
    }
    pid_ = std::exchange(other.pid_, -1);
    group_ = other.group_;
    exit_code_ = other.exit_code_;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !exit_code_) {
    stop();
  }
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_) {
    return false;
  }
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = decodeStatus(status);
    return false;
  }
  return r == 0;
}

void Process::signal(int sig) {
  if (pid_ <= 0 || exit_code_) {
    return;
  }
  if (group_) {
    ::kill(-pid_, sig);
  }
  ::kill(pid_, sig);
}

std::optional<int> Process::wait(std::chrono::milliseconds timeout) {
  if (exit_code_) {
    return exit_code_;
  }
  if (pid_ <= 0) {
    return -1;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = decodeStatus(status);
      return exit_code_;
    }
    if (r < 0) {
      exit_code_ = -1;
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Process::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) {
    return -1;
  }
  if (exit_code_) {
    return *exit_code_;
  }
  signal(SIGTERM);
  auto code = wait(grace);
  if (!code) {
    signal(SIGKILL);
    code = wait(std::chrono::seconds(10));
  }
  return code.value_or(-1);
}

namespace {

// The three pipes of a running command, seen from the parent; -1 once closed.
struct CommandPipes {
  int in = -1;   //!< write end of the child's stdin
  int out = -1;  //!< read end of the child's stdout
  int err = -1;  //!< read end of the child's stderr

  CommandPipes() = default;
  CommandPipes(const CommandPipes&) = delete;
  CommandPipes& operator=(const CommandPipes&) = delete;
  ~CommandPipes() { closeAll(); }

  void closeAll() {
    for (int* fd : {&in, &out, &err}) {
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
    }
  }
};

void closeFd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

// Forks the child with its stdin/stdout/stderr on fresh pipes; the parent keeps the other ends in `pipes`.
Result<pid_t> spawnWithPipes(const CommandOptions& options, CommandPipes& pipes) {
  int in_pipe[2];
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    return fail(ErrorKind::kTransient, std::string("pipe failed: ") + errnoText(errno));
  }
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = buildEnvironment(options.env, options.inherit_env);
  auto argv = cStrings(args);
  auto envp = cStrings(env);
  pid_t pid = fork();
  if (pid < 0) {
    return fail(ErrorKind::kTransient, std::string("fork failed: ") + errnoText(errno));
  }
  if (pid == 0) {
    execChild(argv.data(), envp.data(), options.cwd.empty() ? nullptr : options.cwd.c_str(), out_pipe[1], err_pipe[1],
              in_pipe[0], true);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  pipes.in = in_pipe[1];
  pipes.out = out_pipe[0];
  pipes.err = err_pipe[0];
  return pid;
}

// Appends what is readable on `fd` to `sink`; closes `fd` at end of stream or on a read error.
void drainReadable(int& fd, short revents, std::string& sink) {
  if (fd < 0 || (revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
    return;
  }
  char buffer[65536];
  ssize_t got = ::read(fd, buffer, sizeof buffer);
  if (got > 0) {
    sink.append(buffer, static_cast<size_t>(got));
  } else if (got == 0 || errno != EAGAIN) {
    closeFd(fd);
  }
}

// Writes the next piece of `input` to the child's stdin; closes it when all is written or the child stops reading.
void feedInput(int& fd, short revents, std::string_view input, size_t& written) {
  if (fd < 0 || (revents & (POLLOUT | POLLERR | POLLHUP)) == 0) {
    return;
  }
  ssize_t put = ::write(fd, input.data() + written, input.size() - written);
  if (put > 0) {
    written += static_cast<size_t>(put);
  }
  if (put < 0 && errno != EAGAIN) {
    written = input.size();
  }
  if (written >= input.size()) {
    closeFd(fd);
  }
}

// Feeds stdin and drains both outputs together so no pipe fills and deadlocks the child. Kills the child's group
// on timeout or when it writes more than the limit.
void exchangeWithChild(pid_t pid, const CommandOptions& options, CommandPipes& pipes, CommandResult& result) {
  fcntl(pipes.in, F_SETFL, O_NONBLOCK);
  if (options.input.empty()) {
    closeFd(pipes.in);
  }
  size_t written = 0;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (pipes.out >= 0 || pipes.err >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || result.out.size() + result.err.size() > options.max_output_bytes) {
      result.timed_out = left.count() <= 0;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      return;
    }
    pollfd fds[3] = {{pipes.out, POLLIN, 0}, {pipes.err, POLLIN, 0}, {pipes.in, POLLOUT, 0}};
    if (::poll(fds, 3, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) {
      return;
    }
    drainReadable(pipes.out, fds[0].revents, result.out);
    drainReadable(pipes.err, fds[1].revents, result.err);
    feedInput(pipes.in, fds[2].revents, options.input, written);
  }
}

}  // namespace

Result<CommandResult> runCommand(const CommandOptions& options) {
  if (options.argv.empty()) {
    return fail(ErrorKind::kInvalid, "no program given");
  }
  CommandPipes pipes;
  auto pid = spawnWithPipes(options, pipes);
  if (!pid.ok()) {
    return fail(pid.error());
  }
  CommandResult result;
  exchangeWithChild(*pid, options, pipes, result);
  // Close our ends before waiting, so a child still writing to a full pipe gets EPIPE instead of blocking.
  pipes.closeAll();
  int status = 0;
  waitpid(*pid, &status, 0);
  result.exit_code = decodeStatus(status);
  return result;
}

}  // namespace flotilla
