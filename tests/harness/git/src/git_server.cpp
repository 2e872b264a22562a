#include "flotilla/harness/git_server.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/core/util.h"
#include "flotilla/harness/log_tail.h"

namespace flotilla::harness {
namespace fs = std::filesystem;

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(15);
constexpr const char* kSshd = "/usr/sbin/sshd";

std::string scriptPath() {
  return std::string(FLOTILLA_SOURCE_DIR) + "/tests/harness/git/git_http_server.py";
}

// The system interpreter: a version-manager shim first in PATH (pyenv) can cost a second per start.
std::string python() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

// Runs `argv` under a small sh watchdog that stops it when this (test) process is gone, so a crashed or
// killed test does not leave git daemon or sshd running. Process::stop() signals the whole group as usual.
std::vector<std::string> watched(std::vector<std::string> argv) {
  const std::string parent = std::to_string(::getpid());
  std::vector<std::string> out = {"/bin/sh", "-c",
                                  "\"$@\" & child=$!; "
                                  "while kill -0 " +
                                      parent +
                                      " 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 0.5; done; "
                                      "kill $child 2>/dev/null; wait $child",
                                  "watchdog"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// Runs a setup tool (openssl, ssh-keygen) that must succeed; `what` names it in the error.
Status runSetupTool(const std::vector<std::string>& argv, const std::string& what, const char* where) {
  auto result = runCommand({.argv = argv, .timeout = std::chrono::seconds(30)});
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->exit_code != 0) {
    return fail(ErrorKind::kInternal, what + " failed: " + trim(result->err), where);
  }
  return okStatus();
}

std::string tailOf(const std::string& path, size_t lines) {
  auto content = readFile(path);
  return content.ok() ? lastLines(*content, lines) : std::string();
}

// fast-import accepts C-style quoted paths; quoting every path keeps spaces and odd characters safe.
std::string quotePath(const std::string& path) {
  std::string out = "\"";
  for (char c : path) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string dataBlock(const std::string& content) {
  return "data " + std::to_string(content.size()) + "\n" + content + "\n";
}

}  // namespace

Result<std::unique_ptr<GitServer>> GitServer::start(GitServerOptions options) {
  std::unique_ptr<GitServer> server(new GitServer(std::move(options)));
  FLOTILLA_TRY(server->prepare());
  if (server->options_.http || server->options_.https) {
    FLOTILLA_TRY(server->startHttp());
  }
  if (server->options_.git_daemon) {
    FLOTILLA_TRY(server->startGitDaemon());
  }
  if (server->options_.ssh) {
    FLOTILLA_TRY(server->startSsh());
  }
  return server;
}

GitServer::~GitServer() {
  sshd_.stop();
  daemon_.stop();
  https_.stop();
  http_.stop();
}

Status GitServer::prepare() {
  FLOTILLA_TRY(makeDir("flotilla-git"));
  repos_ = root() + "/repos";
  std::error_code ec;
  for (const char* sub : {"/repos", "/home", "/logs", "/tls", "/ssh"}) {
    fs::create_directories(root() + sub, ec);
    if (ec) {
      return fail(ErrorKind::kInternal, "cannot create " + root() + sub + ": " + ec.message(), "GitServer::prepare");
    }
  }
  if (options_.https) {
    FLOTILLA_TRY(makeCertificates());
  }
  if (options_.ssh) {
    FLOTILLA_TRY(makeSshKeys());
  }
  return okStatus();
}

std::map<std::string, std::string> GitServer::gitEnv() const {
  return {
      {"HOME", root() + "/home"},
      {"GIT_CONFIG_NOSYSTEM", "1"},
      {"GIT_CONFIG_GLOBAL", "/dev/null"},
      {"GIT_TERMINAL_PROMPT", "0"},
      {"GIT_AUTHOR_NAME", "Flotilla Test"},
      {"GIT_AUTHOR_EMAIL", "test@flotilla.invalid"},
      {"GIT_COMMITTER_NAME", "Flotilla Test"},
      {"GIT_COMMITTER_EMAIL", "test@flotilla.invalid"},
      {"GIT_CONFIG_COUNT", "1"},
      {"GIT_CONFIG_KEY_0", "safe.directory"},
      {"GIT_CONFIG_VALUE_0", "*"},
      {"LC_ALL", "C"},
  };
}

Result<std::string> GitServer::runGit(const std::vector<std::string>& args, const std::string& input,
                                      const std::map<std::string, std::string>& extra_env) {
  CommandOptions command{.argv = {"git"}, .env = gitEnv(), .input = input, .timeout = std::chrono::seconds(60)};
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  for (const auto& [key, value] : extra_env) {
    command.env[key] = value;
  }
  auto result = runCommand(command);
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->exit_code != 0) {
    std::string shown;
    for (const auto& arg : args) {
      shown += " " + arg;
    }
    return fail(ErrorKind::kInternal,
                "git" + shown + " exited " + std::to_string(result->exit_code) + ": " + trim(result->err),
                "GitServer::runGit");
  }
  return std::move(result->out);
}

Status GitServer::makeCertificates() {
  const std::string dir = root() + "/tls";
  ca_file_ = dir + "/ca.crt";
  other_ca_file_ = dir + "/other-ca.crt";
  server_cert_ = dir + "/server.crt";
  server_key_ = dir + "/server.key";
  FLOTILLA_TRY(writeFile(dir + "/server.ext",
                         "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                         "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"));
  const std::vector<std::vector<std::string>> steps = {
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       dir + "/ca.key", "-out", ca_file_, "-days", "30", "-subj", "/CN=Flotilla Test CA"},
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       dir + "/other-ca.key", "-out", other_ca_file_, "-days", "30", "-subj", "/CN=Flotilla Unrelated CA"},
      {"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       server_key_, "-out", dir + "/server.csr", "-subj", "/CN=127.0.0.1"},
      {"openssl", "x509", "-req", "-in", dir + "/server.csr", "-CA", ca_file_, "-CAkey", dir + "/ca.key",
       "-CAcreateserial", "-out", server_cert_, "-days", "30", "-sha256", "-extfile", dir + "/server.ext"},
  };
  for (const auto& argv : steps) {
    FLOTILLA_TRY(runSetupTool(argv, "openssl " + argv[1], "GitServer::makeCertificates"));
  }
  return okStatus();
}

Status GitServer::makeSshKeys() {
  const std::string dir = root() + "/ssh";
  // Each key's file name next to the member that keeps its path.
  const std::pair<std::string*, const char*> keys[] = {{&host_key_, "host_key"},
                                                       {&other_host_key_, "other_host_key"},
                                                       {&client_key_, "client_key"},
                                                       {&other_client_key_, "other_client_key"}};
  for (const auto& [path, file] : keys) {
    *path = dir + "/" + file;
    FLOTILLA_TRY(runSetupTool({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "flotilla-test", "-f", *path},
                              "ssh-keygen", "GitServer::makeSshKeys"));
  }
  auto pub = readFile(client_key_ + ".pub");
  if (!pub.ok()) {
    return fail(pub.error());
  }
  return writeFile(dir + "/authorized_keys", *pub, 0600);
}

Status GitServer::waitForPort(Process& process, int port, const std::string& log, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process.running()) {
      return fail(ErrorKind::kTransient, what + " exited during startup; log:\n" + tailOf(log, 30),
                  "GitServer::waitForPort");
    }
    if (acceptsLocalConnections(port)) {
      return okStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fail(ErrorKind::kTransient,
              what + " did not listen on port " + std::to_string(port) + " in time; log:\n" + tailOf(log, 30),
              "GitServer::waitForPort");
}

Status GitServer::startOnFreePort(Process& into, int& port, const std::string& log, const std::string& what,
                                  const std::function<Result<Process>()>& start) {
  Error last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (port == 0 || attempt > 0) {
      auto free_port = freeTcpPort();
      if (!free_port.ok()) {
        return fail(free_port.error());
      }
      port = *free_port;
    }
    auto process = start();
    if (!process.ok()) {
      return fail(process.error());
    }
    auto ready = waitForPort(*process, port, log, what);
    if (ready.ok()) {
      into = std::move(*process);
      return okStatus();
    }
    last = ready.error();
  }
  return fail(last);
}

Result<Process> GitServer::startHttpServer(bool tls, int& port) {
  const std::string name = tls ? "https" : "http";
  const std::string log = root() + "/logs/" + name + ".log";
  const std::string port_file = root() + "/" + name + ".port";
  removeAll(port_file);
  ProcessOptions process_options{
      .argv = {python(), scriptPath(), "--root", repos_, "--host", options_.http_listen_address, "--port",
               std::to_string(port), "--port-file", port_file, "--parent-pid", std::to_string(::getpid())},
      .env = gitEnv(),
      .output_file = log,
  };
  if (tls) {
    process_options.argv.insert(process_options.argv.end(), {"--tls-cert", server_cert_, "--tls-key", server_key_});
  }
  process_options.env["FLOTILLA_GIT_HTTP_USER"] = options_.basic_user;
  process_options.env["FLOTILLA_GIT_HTTP_PASSWORD"] = options_.basic_password;
  process_options.env["FLOTILLA_GIT_HTTP_TOKEN"] = options_.token;
  process_options.env["PYTHONUNBUFFERED"] = "1";
  auto process = Process::start(process_options);
  if (!process.ok()) {
    return fail(process.error());
  }
  auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (true) {
    if (!process->running()) {
      return fail(ErrorKind::kTransient, name + " server exited during startup; log:\n" + tailOf(log, 30),
                  "GitServer::startHttpServer");
    }
    auto text = readFile(port_file);
    if (text.ok() && !trim(*text).empty()) {
      port = std::stoi(trim(*text));
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(ErrorKind::kTransient, name + " server did not report its port; log:\n" + tailOf(log, 30),
                  "GitServer::startHttpServer");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FLOTILLA_TRY(waitForPort(*process, port, log, name + " server"));
  return std::move(*process);
}

Status GitServer::startHttp() {
  if (options_.http && !http_.running()) {
    auto process = startHttpServer(false, http_port_);
    if (!process.ok()) {
      return fail(process.error());
    }
    http_ = std::move(*process);
  }
  if (options_.https && !https_.running()) {
    auto process = startHttpServer(true, https_port_);
    if (!process.ok()) {
      return fail(process.error());
    }
    https_ = std::move(*process);
  }
  return okStatus();
}

void GitServer::stopHttp() {
  http_.stop();
  https_.stop();
}

Status GitServer::restartHttp() {
  stopHttp();
  return startHttp();
}

Status GitServer::startGitDaemon() {
  if (daemon_.running()) {
    return okStatus();
  }
  const std::string log = root() + "/logs/git-daemon.log";
  return startOnFreePort(daemon_, git_port_, log, "git daemon", [&] {
    return Process::start({
        .argv =
            watched({"git", "daemon", "--reuseaddr", "--export-all", "--base-path=" + repos_, "--enable=receive-pack",
                     "--listen=127.0.0.1", "--port=" + std::to_string(git_port_), "--informative-errors", "--verbose"}),
        .env = gitEnv(),
        .output_file = log,
    });
  });
}

void GitServer::stopGitDaemon() {
  daemon_.stop();
}

Status GitServer::startSsh() {
  if (sshd_.running()) {
    return okStatus();
  }
  if (::access(kSshd, X_OK) != 0) {
    return fail(ErrorKind::kPermanent,
                std::string(kSshd) + " not found: the SSH git server needs the openssh-server package",
                "GitServer::startSsh");
  }
  if (::geteuid() != 0) {
    return fail(ErrorKind::kPermanent, "the SSH git server runs sshd as root; this process is not root",
                "GitServer::startSsh");
  }
  // sshd refuses to start without its privilege-separation directory; a fresh container lacks it.
  std::error_code ec;
  fs::create_directories("/run/sshd", ec);
  const std::string dir = root() + "/ssh";
  const std::string config = dir + "/sshd_config";
  FLOTILLA_TRY(writeFile(config,
                         "ListenAddress 127.0.0.1\n"
                         "HostKey " +
                             host_key_ +
                             "\n"
                             "AuthorizedKeysFile " +
                             dir +
                             "/authorized_keys\n"
                             "PidFile " +
                             dir +
                             "/sshd.pid\n"
                             "PermitRootLogin prohibit-password\n"
                             "PubkeyAuthentication yes\n"
                             "PasswordAuthentication no\n"
                             "KbdInteractiveAuthentication no\n"
                             "StrictModes no\n"
                             "UsePAM no\n"
                             "UseDNS no\n"
                             "PrintMotd no\n"
                             "PrintLastLog no\n"
                             "X11Forwarding no\n"
                             "AllowTcpForwarding no\n"
                             "MaxStartups 100\n"
                             "LogLevel VERBOSE\n"
                             // The session shell is root's bash, which sources ~/.bashrc for ssh commands;
                             // an isolated HOME keeps the developer's shell setup (slow pyenv init, ...) out.
                             "SetEnv HOME=" +
                             root() + "/home GIT_CONFIG_NOSYSTEM=1\n"));
  const std::string log = root() + "/logs/sshd.log";
  return startOnFreePort(sshd_, ssh_port_, log, "sshd", [&] {
    return Process::start({
        .argv = watched({kSshd, "-D", "-e", "-f", config, "-p", std::to_string(ssh_port_)}),
        .output_file = log,
    });
  });
}

void GitServer::stopSsh() {
  sshd_.stop();
}

std::string GitServer::repoPath(const std::string& repo) const {
  return repos_ + "/" + repo + ".git";
}

GitRepoUrls GitServer::repo(const std::string& name) const {
  return GitRepoUrls{
      .name = name,
      .path = repoPath(name),
      .http = options_.http ? httpUrl(name) : "",
      .https = options_.https ? httpsUrl(name) : "",
      .git = options_.git_daemon ? gitUrl(name) : "",
      .ssh = options_.ssh ? sshUrl(name) : "",
  };
}

std::string GitServer::httpUrl(const std::string& repo, const std::string& host) const {
  return "http://" + host + ":" + std::to_string(http_port_) + "/" + repo + ".git";
}
std::string GitServer::httpsUrl(const std::string& repo, const std::string& host) const {
  return "https://" + host + ":" + std::to_string(https_port_) + "/" + repo + ".git";
}
std::string GitServer::httpRedirectUrl(const std::string& repo) const {
  return "http://127.0.0.1:" + std::to_string(http_port_) + "/redirect/" + repo + ".git";
}
std::string GitServer::gitUrl(const std::string& repo) const {
  return "git://127.0.0.1:" + std::to_string(git_port_) + "/" + repo + ".git";
}
std::string GitServer::sshUrl(const std::string& repo) const {
  return "ssh://root@127.0.0.1:" + std::to_string(ssh_port_) + repoPath(repo);
}

Result<GitRepoUrls> GitServer::createRepo(const std::string& name, const std::string& default_branch) {
  if (name.empty() || name.find("..") != std::string::npos || name.front() == '/') {
    return fail(ErrorKind::kInvalid, "bad repo name '" + name + "'", "GitServer::createRepo");
  }
  auto made = runGit({"init", "--quiet", "--bare", "--initial-branch=" + default_branch, repoPath(name)});
  if (!made.ok()) {
    return fail(made.error());
  }
  return repo(name);
}

Result<std::string> GitServer::git(const std::string& repo, const std::vector<std::string>& args,
                                   const std::string& input) {
  std::vector<std::string> argv = {"--git-dir=" + repoPath(repo)};
  argv.insert(argv.end(), args.begin(), args.end());
  return runGit(argv, input);
}

Result<std::string> GitServer::headCommit(const std::string& repo, const std::string& branch) {
  auto out = git(repo, {"rev-parse", "--verify", "--quiet", "refs/heads/" + branch + "^{commit}"});
  if (!out.ok()) {
    return fail(ErrorKind::kNotFound, "no branch '" + branch + "' in " + repo, "GitServer::headCommit");
  }
  return trim(*out);
}

Result<std::string> GitServer::commit(const std::string& repo, const CommitRequest& request) {
  std::string parent;
  if (request.from) {
    auto sha = git(repo, {"rev-parse", "--verify", "--quiet", *request.from + "^{commit}"});
    if (!sha.ok()) {
      return fail(ErrorKind::kNotFound, "no commit '" + *request.from + "' in " + repo, "GitServer::commit");
    }
    parent = trim(*sha);
  } else if (auto head = headCommit(repo, request.branch); head.ok()) {
    parent = *head;
  }
  const std::string who = "Flotilla Test <test@flotilla.invalid> " + std::to_string(std::time(nullptr)) + " +0000";
  std::string stream = "commit refs/heads/" + request.branch + "\n";
  stream += "author " + who + "\n";
  stream += "committer " + who + "\n";
  stream += dataBlock(request.message);
  if (!parent.empty()) {
    stream += "from " + parent + "\n";
  }
  for (const auto& path : request.removals) {
    stream += "D " + quotePath(path) + "\n";
  }
  for (const auto& [path, content] : request.files) {
    const char* mode = request.executable.count(path) != 0 ? "100755" : "100644";
    stream += std::string("M ") + mode + " inline " + quotePath(path) + "\n" + dataBlock(content);
  }
  for (const auto& [path, target] : request.symlinks) {
    stream += "M 120000 inline " + quotePath(path) + "\n" + dataBlock(target);
  }
  stream += "done\n";
  auto imported = git(repo, {"fast-import", "--quiet", "--force", "--done"}, stream);
  if (!imported.ok()) {
    return fail(imported.error());
  }
  return headCommit(repo, request.branch);
}

Result<std::string> GitServer::commitFiles(const std::string& repo, const std::string& branch,
                                           const std::map<std::string, std::string>& files, const std::string& message,
                                           const std::vector<std::string>& removals) {
  return commit(repo, CommitRequest{.branch = branch, .files = files, .removals = removals, .message = message});
}

Result<std::string> GitServer::deleteFiles(const std::string& repo, const std::string& branch,
                                           const std::vector<std::string>& paths, const std::string& message) {
  return commit(repo, CommitRequest{.branch = branch, .removals = paths, .message = message});
}

Status GitServer::createTag(const std::string& repo, const std::string& tag, const std::string& target,
                            const std::string& message) {
  std::vector<std::string> args = {"tag", "-f"};
  if (!message.empty()) {
    args.insert(args.end(), {"-a", "-m", message});
  }
  args.insert(args.end(), {tag, target});
  auto out = git(repo, args);
  if (!out.ok()) {
    return fail(out.error());
  }
  return okStatus();
}

Status GitServer::deleteTag(const std::string& repo, const std::string& tag) {
  auto out = git(repo, {"update-ref", "-d", "refs/tags/" + tag});
  return out.ok() ? okStatus() : Status(fail(out.error()));
}

Status GitServer::createBranch(const std::string& repo, const std::string& branch, const std::string& target) {
  auto sha = git(repo, {"rev-parse", "--verify", "--quiet", target + "^{commit}"});
  if (!sha.ok()) {
    return fail(ErrorKind::kNotFound, "no commit '" + target + "' in " + repo, "GitServer::createBranch");
  }
  auto out = git(repo, {"update-ref", "refs/heads/" + branch, trim(*sha)});
  return out.ok() ? okStatus() : Status(fail(out.error()));
}

Status GitServer::deleteBranch(const std::string& repo, const std::string& branch) {
  auto out = git(repo, {"update-ref", "-d", "refs/heads/" + branch});
  return out.ok() ? okStatus() : Status(fail(out.error()));
}

Status GitServer::setDefaultBranch(const std::string& repo, const std::string& branch) {
  auto out = git(repo, {"symbolic-ref", "HEAD", "refs/heads/" + branch});
  return out.ok() ? okStatus() : Status(fail(out.error()));
}

std::string GitServer::caPem() const {
  return readFile(ca_file_).valueOr("");
}
std::string GitServer::otherCaPem() const {
  return readFile(other_ca_file_).valueOr("");
}
std::string GitServer::sshPrivateKey() const {
  return readFile(client_key_).valueOr("");
}
std::string GitServer::sshPublicKey() const {
  return readFile(client_key_ + ".pub").valueOr("");
}
std::string GitServer::unauthorizedSshPrivateKey() const {
  return readFile(other_client_key_).valueOr("");
}

namespace {
// "ssh-ed25519 AAAA... comment" -> "ssh-ed25519 AAAA..."
std::string keyTypeAndBlob(const std::string& pub_line) {
  auto parts = split(trim(pub_line), ' ');
  return parts.size() >= 2 ? parts[0] + " " + parts[1] : trim(pub_line);
}
}  // namespace

std::string GitServer::knownHostsLine() const {
  return "[127.0.0.1]:" + std::to_string(ssh_port_) + " " + keyTypeAndBlob(readFile(host_key_ + ".pub").valueOr(""));
}

std::string GitServer::wrongKnownHostsLine() const {
  return "[127.0.0.1]:" + std::to_string(ssh_port_) + " " +
         keyTypeAndBlob(readFile(other_host_key_ + ".pub").valueOr(""));
}

std::string GitServer::gitSshCommand() const {
  const std::string known_hosts = root() + "/ssh/known_hosts";
  (void)writeFile(known_hosts, knownHostsLine() + "\n");
  return "ssh -i " + client_key_ + " -o IdentitiesOnly=yes -o UserKnownHostsFile=" + known_hosts +
         " -o StrictHostKeyChecking=yes -o BatchMode=yes";
}

std::string GitServer::logTail(size_t lines) const {
  std::string out;
  std::error_code ec;
  std::vector<std::string> logs;
  for (const auto& entry : fs::directory_iterator(root() + "/logs", ec)) {
    logs.push_back(entry.path().string());
  }
  std::sort(logs.begin(), logs.end());
  for (const auto& path : logs) {
    out += "== " + fs::path(path).filename().string() + " ==\n" + tailOf(path, lines);
  }
  return out;
}

}  // namespace flotilla::harness
