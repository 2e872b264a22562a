#include "flotilla/kube/kubeconfig.h"

#include <cstdlib>
#include <filesystem>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"

namespace flotilla::kube {
namespace {

// Errors name the kubeconfig field the way a user would look for it: "users[admin].user.client-key".
Failure invalid(std::string_view source, const std::string& field, const std::string& problem) {
  return fail(ErrorKind::kInvalid, field + ": " + problem, std::string(source));
}

// The entry of a named list ("clusters", "users", "contexts") with name == `name`.
const Json* findNamed(const Json& root, std::string_view list, std::string_view name) {
  const Json* items = root.find(list);
  if (items == nullptr || !items->isArray()) {
    return nullptr;
  }
  for (const auto& item : items->asArray()) {
    if (item.isObject() && item.getString("name") == name) {
      return &item;
    }
  }
  return nullptr;
}

std::string resolvePath(const std::string& path, const std::string& dir) {
  if (path.empty() || path.front() == '/' || dir.empty()) {
    return path;
  }
  return dir + "/" + path;
}

// Reads a field that is either inline base64 ("<name>-data") or a file ("<name>"); the -data form wins, as in
// kubectl. Empty when neither is set.
Result<std::string> fileOrData(const Json& section, const std::string& name, const std::string& dir,
                               const std::string& field_prefix, std::string_view source) {
  std::string data = section.getString(name + "-data");
  if (!data.empty()) {
    auto decoded = base64Decode(data);
    if (!decoded.ok()) {
      return invalid(source, field_prefix + name + "-data", "not valid base64");
    }
    return std::move(*decoded);
  }
  std::string file = section.getString(name);
  if (file.empty()) {
    return std::string();
  }
  std::string path = resolvePath(file, dir);
  auto content = readFile(path);
  if (!content.ok()) {
    return invalid(source, field_prefix + name, "cannot read " + path + ": " + content.error().message);
  }
  return std::move(*content);
}

Status checkType(const Json& parent, std::string_view key, Json::Type type, const std::string& field,
                 std::string_view source) {
  const Json* value = parent.find(key);
  if (value != nullptr && !value->isNull() && value->type() != type) {
    return invalid(source, field, type == Json::Type::kString ? "must be a string" : "has the wrong type");
  }
  return okStatus();
}

}  // namespace

std::string Kubeconfig::hostPort() const {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + port;
}

Status parseServerUrl(std::string_view url, Kubeconfig& out) {
  constexpr std::string_view kScheme = "https://";
  if (!startsWith(url, kScheme)) {
    return fail(ErrorKind::kInvalid, "server: only https:// URLs are supported, got \"" + std::string(url) + "\"");
  }
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  std::string host;
  std::string port = "443";
  if (startsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return fail(ErrorKind::kInvalid, "server: unterminated [ in \"" + std::string(url) + "\"");
    }
    host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return fail(ErrorKind::kInvalid, "server: malformed address in \"" + std::string(url) + "\"");
      }
      port = std::string(after.substr(1));
    }
  } else {
    size_t colon = authority.rfind(':');
    host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = std::string(authority.substr(colon + 1));
    }
  }
  if (host.empty()) {
    return fail(ErrorKind::kInvalid, "server: no host in \"" + std::string(url) + "\"");
  }
  // At most 5 digits before std::stoi, which throws on a number beyond int (found by fuzz/kubeconfig_fuzzer).
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535) {
    return fail(ErrorKind::kInvalid, "server: bad port in \"" + std::string(url) + "\"");
  }
  std::string prefix(path);
  while (!prefix.empty() && prefix.back() == '/') {
    prefix.pop_back();
  }
  out.server = std::string(url);
  out.host = std::move(host);
  out.port = std::move(port);
  out.base_path = std::move(prefix);
  return okStatus();
}

Result<Kubeconfig> Kubeconfig::load(const std::string& path, std::string_view context) {
  auto text = readFile(path);
  if (!text.ok()) {
    return fail(ErrorKind::kInvalid, "cannot read kubeconfig " + path + ": " + text.error().message, path);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse(*text, dir, path, context);
}

namespace {

// Where a parse is: the kubeconfig's directory (for relative paths) and its name (for errors).
struct ParseSource {
  const std::string& dir;
  std::string_view name;
};

// The context to use: sets out.context and out.default_namespace; returns its cluster and user names.
Result<std::pair<std::string, std::string>> readContext(const Json& root, std::string_view context,
                                                        const ParseSource& src, Kubeconfig& out) {
  FLOTILLA_TRY(checkType(root, "current-context", Json::Type::kString, "current-context", src.name));
  out.context = context.empty() ? root.getString("current-context") : std::string(context);
  if (out.context.empty()) {
    return invalid(src.name, "current-context", "not set and no context was asked for");
  }
  const Json* entry = findNamed(root, "contexts", out.context);
  if (entry == nullptr) {
    return invalid(src.name, "contexts[" + out.context + "]", "no such context");
  }
  const Json* ctx = entry->find("context");
  if (ctx == nullptr || !ctx->isObject()) {
    return invalid(src.name, "contexts[" + out.context + "].context", "missing");
  }
  std::string cluster_name = ctx->getString("cluster");
  if (cluster_name.empty()) {
    return invalid(src.name, "contexts[" + out.context + "].context.cluster", "missing");
  }
  if (std::string ns = ctx->getString("namespace"); !ns.empty()) {
    out.default_namespace = ns;
  }
  return std::pair<std::string, std::string>{cluster_name, ctx->getString("user")};
}

// clusters[name].cluster: server, CA, TLS options.
Status readCluster(const Json& root, const std::string& name, const ParseSource& src, Kubeconfig& out) {
  const Json* entry = findNamed(root, "clusters", name);
  if (entry == nullptr) {
    return invalid(src.name, "clusters[" + name + "]", "no such cluster");
  }
  const Json* cluster = entry->find("cluster");
  const std::string field = "clusters[" + name + "].cluster.";
  if (cluster == nullptr || !cluster->isObject()) {
    return invalid(src.name, "clusters[" + name + "].cluster", "missing");
  }
  FLOTILLA_TRY(checkType(*cluster, "server", Json::Type::kString, field + "server", src.name));
  std::string server = cluster->getString("server");
  if (server.empty()) {
    return invalid(src.name, field + "server", "missing");
  }
  if (auto url = parseServerUrl(server, out); !url.ok()) {
    return fail(ErrorKind::kInvalid, field + url.error().message, std::string(src.name));
  }
  auto ca = fileOrData(*cluster, "certificate-authority", src.dir, field, src.name);
  FLOTILLA_TRY(ca);
  out.ca_pem = std::move(*ca);
  FLOTILLA_TRY(
      checkType(*cluster, "insecure-skip-tls-verify", Json::Type::kBool, field + "insecure-skip-tls-verify", src.name));
  out.insecure_skip_tls_verify = cluster->getBool("insecure-skip-tls-verify");
  out.tls_server_name = cluster->getString("tls-server-name");
  return okStatus();
}

// The user's bearer token: `token`, else the content of `tokenFile` (whose path the client keeps to re-read).
Status readToken(const Json& user, const std::string& field, const ParseSource& src, Kubeconfig& out) {
  FLOTILLA_TRY(checkType(user, "token", Json::Type::kString, field + "token", src.name));
  out.token = user.getString("token");
  std::string token_file = user.getString("tokenFile");
  if (token_file.empty() || !out.token.empty()) {
    return okStatus();
  }
  out.token_file = resolvePath(token_file, src.dir);
  auto token = readFile(out.token_file);
  if (!token.ok()) {
    return invalid(src.name, field + "tokenFile", "cannot read " + out.token_file + ": " + token.error().message);
  }
  out.token = trim(*token);
  return okStatus();
}

// users[name].user: a client certificate and key, and/or a token. Other ways to log in are refused by name.
Status readUser(const Json& root, const std::string& name, const ParseSource& src, Kubeconfig& out) {
  const Json* entry = findNamed(root, "users", name);
  if (entry == nullptr) {
    return invalid(src.name, "users[" + name + "]", "no such user");
  }
  const Json* user = entry->find("user");
  if (user == nullptr || !user->isObject()) {
    return okStatus();
  }
  const std::string field = "users[" + name + "].user.";
  for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
    if (user->contains(unsupported)) {
      return invalid(src.name, field + unsupported, "not supported (use a client certificate or a token)");
    }
  }
  auto cert = fileOrData(*user, "client-certificate", src.dir, field, src.name);
  FLOTILLA_TRY(cert);
  auto key = fileOrData(*user, "client-key", src.dir, field, src.name);
  FLOTILLA_TRY(key);
  if (cert->empty() != key->empty()) {
    return invalid(src.name, field + (cert->empty() ? "client-certificate" : "client-key"),
                   "missing (client-certificate and client-key go together)");
  }
  out.client_cert_pem = std::move(*cert);
  out.client_key_pem = std::move(*key);
  return readToken(*user, field, src, out);
}

}  // namespace

Result<Kubeconfig> Kubeconfig::parse(std::string_view text, const std::string& dir, std::string_view source,
                                     std::string_view context) {
  auto parsed = parseYaml(text, source);
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, "kubeconfig is not valid YAML: " + parsed.error().describe(), std::string(source));
  }
  const Json& root = *parsed;
  if (!root.isObject()) {
    return invalid(source, "kubeconfig", "not a YAML mapping");
  }
  const ParseSource src{dir, source};
  Kubeconfig out;
  auto names = readContext(root, context, src, out);
  FLOTILLA_TRY(names);
  FLOTILLA_TRY(readCluster(root, names->first, src, out));
  if (!names->second.empty()) {
    FLOTILLA_TRY(readUser(root, names->second, src, out));
  }
  return out;
}

Result<Kubeconfig> Kubeconfig::inCluster(const std::string& sa_dir) {
  std::string host = envOr("KUBERNETES_SERVICE_HOST", "");
  std::string port = envOr("KUBERNETES_SERVICE_PORT", "443");
  if (host.empty()) {
    return fail(ErrorKind::kInvalid, "not running in a pod: KUBERNETES_SERVICE_HOST is not set",
                "Kubeconfig::inCluster");
  }
  Kubeconfig out;
  out.context = "in-cluster";
  bool ipv6 = host.find(':') != std::string::npos;
  FLOTILLA_TRY(parseServerUrl("https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port, out));
  out.token_file = sa_dir + "/token";
  auto token = readFile(out.token_file);
  if (!token.ok()) {
    return fail(ErrorKind::kInvalid, "service account token: " + token.error().message, "Kubeconfig::inCluster");
  }
  out.token = trim(*token);
  auto ca = readFile(sa_dir + "/ca.crt");
  if (!ca.ok()) {
    return fail(ErrorKind::kInvalid, "service account ca.crt: " + ca.error().message, "Kubeconfig::inCluster");
  }
  out.ca_pem = std::move(*ca);
  auto ns = readFile(sa_dir + "/namespace");
  if (ns.ok() && !trim(*ns).empty()) {
    out.default_namespace = trim(*ns);
  }
  return out;
}

Result<Kubeconfig> Kubeconfig::loadDefault() {
  if (!envOr("KUBERNETES_SERVICE_HOST", "").empty()) {
    return inCluster();
  }
  std::string env = envOr("KUBECONFIG", "");
  if (!env.empty()) {
    return load(split(env, ':').front());
  }
  std::string home = envOr("HOME", "");
  if (home.empty()) {
    return fail(ErrorKind::kInvalid, "no kubeconfig: KUBECONFIG and HOME are not set", "Kubeconfig::loadDefault");
  }
  return load(home + "/.kube/config");
}

}  // namespace flotilla::kube
