// flotilla/kube/kubeconfig.h
//
// Where a Kubernetes API server is and how to authenticate to it: read from a kubeconfig file (the subset
// Flotilla supports: server, CA, client certificate, bearer token or token file, insecure-skip-tls-verify,
// tls-server-name, namespace) or from a pod's service account. File references are read at load time so a
// missing file is reported up front, naming the field; a token file is re-read by the client as it rotates.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::kube {

//! Where a pod's service-account credentials are mounted.
inline constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct Kubeconfig {
  std::string context;                        //!< the context used ("in-cluster" for inCluster())
  std::string server;                         //!< "https://host:port[/prefix]" as written
  std::string host;                           //!< from server: "127.0.0.1", "localhost", "::1" (no brackets)
  std::string port;                           //!< from server, "443" when absent
  std::string base_path;                      //!< from server: a path prefix ("" or "/prefix", no trailing slash)
  std::string default_namespace = "default";  //!< the context's namespace (used when a call names none)

  std::string ca_pem;           //!< PEM CA bundle; empty: the system's trust store
  std::string client_cert_pem;  //!< PEM client certificate (chain)
  std::string client_key_pem;   //!< PEM client key
  std::string token;            //!< bearer token (from `token`, or the token file's content at load)
  std::string token_file;       //!< when set, the client re-reads the token from here periodically
  std::string tls_server_name;  //!< name to verify the server's certificate against instead of `host`
  bool insecure_skip_tls_verify = false;

  //! Loads `path`; `context` empty means the kubeconfig's current-context. Relative file paths in the
  //! kubeconfig are resolved against its directory. Bad or missing fields fail with kInvalid naming the field
  //! (e.g. "users[admin].user.client-key: cannot read ..."); an unreadable kubeconfig file is kInvalid too.
  static Result<Kubeconfig> load(const std::string& path, std::string_view context = {});
  //! Parses kubeconfig text; `dir` resolves relative paths, `source` names the input in errors.
  static Result<Kubeconfig> parse(std::string_view text, const std::string& dir, std::string_view source,
                                  std::string_view context = {});
  //! The pod's service account: token, ca.crt and namespace under `sa_dir`, server from
  //! KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT. kInvalid when not running in a pod.
  static Result<Kubeconfig> inCluster(const std::string& sa_dir = std::string(kServiceAccountDir));
  //! In a pod (KUBERNETES_SERVICE_HOST set) the service account, else $KUBECONFIG (its first entry), else
  //! ~/.kube/config: what kubectl would use.
  static Result<Kubeconfig> loadDefault();

  //! "host:port" for the Host header (IPv6 literals in brackets).
  [[nodiscard]] std::string hostPort() const;
};

//! Splits "https://host:port/prefix" into host, port ("443" default) and prefix. kInvalid for other schemes
//! or a malformed URL. Exposed for tests.
Status parseServerUrl(std::string_view url, Kubeconfig& out);

}  // namespace flotilla::kube
