// flotilla/harness/git_server.h
//
// A real git server on 127.0.0.1 for tests: bare repositories in a temp dir, served over smart HTTP and HTTPS
// (the real `git http-backend` behind tests/harness/git/git_http_server.py), git:// (`git daemon`) and SSH
// (`/usr/sbin/sshd` from openssh-server, key auth as root). Every server binds a free port; everything lives in
// one temp dir that is removed, with all processes stopped, when the GitServer is destroyed.
//
// Repositories are changed with the git CLI directly in the bare repo (fast-import), so a commit costs a few
// milliseconds and needs no work tree.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/process.h"
#include "flotilla/core/result.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/harness/server_base.h"

namespace flotilla::harness {

//! Which servers to start and how HTTP(S) authenticates. Unset auth fields mean anonymous access.
struct GitServerOptions {
  bool http = true;        //!< smart HTTP on http://127.0.0.1:<port>/<repo>.git
  bool https = true;       //!< the same over TLS, server cert signed by a CA made for this server
  bool git_daemon = true;  //!< git://127.0.0.1:<port>/<repo>.git
  bool ssh = true;         //!< ssh://root@127.0.0.1:<port>/<abs path>; needs root and openssh-server
  //! When set, HTTP(S) requires `Authorization: Basic` with exactly this user and password (401 otherwise).
  std::string basic_user;
  std::string basic_password;
  //! When set, HTTP(S) also accepts this token as a basic-auth password with any user name (how GitHub and
  //! GitLab tokens work) or as `Authorization: Bearer <token>`.
  std::string token;
  //! Where HTTP(S) listens. "0.0.0.0" lets the pods of a harness node reach it (at the cluster's
  //! podReachableHost(), a host address), which 127.0.0.1 does not.
  std::string http_listen_address = "127.0.0.1";
};

//! Where a repository lives and how to reach it over each protocol (empty when that server is off).
struct GitRepoUrls {
  std::string name;  //!< as given to createRepo, e.g. "app"
  std::string path;  //!< absolute path of the bare repo (<root>/repos/<name>.git)
  std::string http;
  std::string https;
  std::string git;
  std::string ssh;
};

//! One commit made by GitServer::commit. Paths are repo-relative with '/' separators.
struct CommitRequest {
  std::string branch = "main";
  std::map<std::string, std::string> files;     //!< path -> content (mode 100644)
  std::set<std::string> executable;             //!< paths in `files` committed with mode 100755
  std::map<std::string, std::string> symlinks;  //!< path -> link target (mode 120000)
  std::vector<std::string> removals;            //!< files or whole directories to delete
  std::string message = "update";
  std::optional<std::string> from;  //!< parent commit/branch; default: the branch's head (if any)
};

class GitServer : public ServerBase {
 public:
  //! Creates the temp dir, certificates and keys, and starts the servers asked for. On failure the error
  //! message includes the tail of the failing server's log.
  static Result<std::unique_ptr<GitServer>> start(GitServerOptions options = {});

  //! Stops every server; then ServerBase removes the temp dir.
  ~GitServer();

  //! Creates an empty bare repository `<name>.git` whose HEAD points at `default_branch`.
  Result<GitRepoUrls> createRepo(const std::string& name, const std::string& default_branch = "main");
  //! URLs of an existing repository (no check that it exists).
  [[nodiscard]] GitRepoUrls repo(const std::string& name) const;

  //! Commits on `request.branch` (creating it if needed) and returns the new commit's sha.
  Result<std::string> commit(const std::string& repo, const CommitRequest& request);
  //! Shorthand for commit(): writes `files`, deletes `removals`.
  Result<std::string> commitFiles(const std::string& repo, const std::string& branch,
                                  const std::map<std::string, std::string>& files, const std::string& message,
                                  const std::vector<std::string>& removals = {});
  //! Commits the removal of `paths` (files or directories).
  Result<std::string> deleteFiles(const std::string& repo, const std::string& branch,
                                  const std::vector<std::string>& paths, const std::string& message = "delete");
  //! Creates tag `tag` at `target` (branch, tag or sha); annotated when `message` is non-empty.
  Status createTag(const std::string& repo, const std::string& tag, const std::string& target,
                   const std::string& message = "");
  //! Deletes tag `tag`.
  Status deleteTag(const std::string& repo, const std::string& tag);
  //! Creates (or moves) branch `branch` to `target`.
  Status createBranch(const std::string& repo, const std::string& branch, const std::string& target);
  //! Deletes branch `branch`.
  Status deleteBranch(const std::string& repo, const std::string& branch);
  //! Points the repository's HEAD (its default branch) at `branch`.
  Status setDefaultBranch(const std::string& repo, const std::string& branch);
  //! The commit sha at the tip of `branch`; kNotFound if there is no such branch.
  Result<std::string> headCommit(const std::string& repo, const std::string& branch = "main");
  //! Runs `git --git-dir=<repo> <args...>` with the harness environment (for checks the helpers lack).
  Result<std::string> git(const std::string& repo, const std::vector<std::string>& args, const std::string& input = "");

  //! http://<host>:<port>/<repo>.git
  [[nodiscard]] std::string httpUrl(const std::string& repo, const std::string& host = "127.0.0.1") const;
  //! https://<host>:<port>/<repo>.git; the certificate is valid for 127.0.0.1 and localhost.
  [[nodiscard]] std::string httpsUrl(const std::string& repo, const std::string& host = "127.0.0.1") const;
  //! An http URL on 127.0.0.1 that the server answers with a 302 to the same repo on "localhost" (another host
  //! name for the same server), for testing what clients do with credentials across redirects.
  [[nodiscard]] std::string httpRedirectUrl(const std::string& repo) const;
  //! git://127.0.0.1:<port>/<repo>.git
  [[nodiscard]] std::string gitUrl(const std::string& repo) const;
  //! ssh://root@127.0.0.1:<port>/<absolute path of the bare repo>
  [[nodiscard]] std::string sshUrl(const std::string& repo) const;

  //! Stops the HTTP and HTTPS servers (connections are refused until startHttp()).
  void stopHttp();
  //! Starts them again on the same ports.
  Status startHttp();
  //! stopHttp() + startHttp().
  Status restartHttp();
  //! Stops/starts git daemon (restarts on the same port).
  void stopGitDaemon();
  Status startGitDaemon();
  //! Stops/starts sshd (restarts on the same port).
  void stopSsh();
  Status startSsh();

  //! PEM of the CA that signed the HTTPS server's certificate (for 127.0.0.1 and localhost).
  [[nodiscard]] std::string caPem() const;
  //! Path of that CA's PEM file (for GIT_SSL_CAINFO).
  [[nodiscard]] const std::string& caFile() const { return ca_file_; }
  //! PEM of another CA that signed nothing here: a "wrong CA" for negative tests.
  [[nodiscard]] std::string otherCaPem() const;

  //! OpenSSH-format private key whose public half is authorized for root on the SSH server.
  [[nodiscard]] std::string sshPrivateKey() const;
  //! Path of that key file (mode 0600).
  [[nodiscard]] const std::string& sshPrivateKeyPath() const { return client_key_; }
  //! "ssh-ed25519 AAAA... flotilla-test" for the authorized key.
  [[nodiscard]] std::string sshPublicKey() const;
  //! A valid key pair that is NOT authorized (negative tests).
  [[nodiscard]] std::string unauthorizedSshPrivateKey() const;
  //! "[127.0.0.1]:<port> ssh-ed25519 AAAA..." for the server's host key.
  [[nodiscard]] std::string knownHostsLine() const;
  //! The same host pattern with a different key (a "host key changed" known_hosts).
  [[nodiscard]] std::string wrongKnownHostsLine() const;
  //! `ssh` command line (for GIT_SSH_COMMAND) that uses the client key and the server's known_hosts.
  [[nodiscard]] std::string gitSshCommand() const;

  //! Ports of the servers (0 while a server was never started).
  [[nodiscard]] int httpPort() const { return http_port_; }
  [[nodiscard]] int httpsPort() const { return https_port_; }
  [[nodiscard]] int gitPort() const { return git_port_; }
  [[nodiscard]] int sshPort() const { return ssh_port_; }
  //! The temp dir everything lives in.
  [[nodiscard]] const std::string& root() const { return dir(); }
  //! The last `lines` lines of every server log, labelled (for failure messages).
  [[nodiscard]] std::string logTail(size_t lines = 30) const;
  //! Environment for git CLI calls against this server (isolated HOME, no system config).
  [[nodiscard]] std::map<std::string, std::string> gitEnv() const;

 private:
  explicit GitServer(GitServerOptions options) : options_(std::move(options)) {}
  Status prepare();
  Status makeCertificates();
  Status makeSshKeys();
  Result<Process> startHttpServer(bool tls, int& port);
  Status waitForPort(Process& process, int port, const std::string& log, const std::string& what);
  // Starts a server with `start` on `port` (a fresh free port when unset or on a retry) until it listens there;
  // the port is chosen before the server binds it, so another process may take it first.
  Status startOnFreePort(Process& into, int& port, const std::string& log, const std::string& what,
                         const std::function<Result<Process>()>& start);
  [[nodiscard]] std::string repoPath(const std::string& repo) const;
  Result<std::string> runGit(const std::vector<std::string>& args, const std::string& input = "",
                             const std::map<std::string, std::string>& extra_env = {});

  GitServerOptions options_;
  std::string repos_;
  std::string ca_file_;
  std::string other_ca_file_;
  std::string server_cert_;
  std::string server_key_;
  std::string host_key_;
  std::string other_host_key_;
  std::string client_key_;
  std::string other_client_key_;
  Process http_;
  Process https_;
  Process daemon_;
  Process sshd_;
  int http_port_ = 0;
  int https_port_ = 0;
  int git_port_ = 0;
  int ssh_port_ = 0;
};

}  // namespace flotilla::harness
