#include "tool_run.h"

#include <cstdlib>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/source/archive.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace detail {

namespace {

//! What a tool gets of the bundler's own environment: enough to run (PATH, locale, time zone, the system CAs)
//! and, for fetch steps, the operator's proxies. Nothing else: the tools run without the NATS credentials,
//! FLOTILLA_* settings or any cloud credentials the bundler's environment holds.
constexpr const char* kInherited[] = {"PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR"};
constexpr const char* kProxies[] = {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"};

void inherit(std::map<std::string, std::string>& env, const char* name) {
  if (const char* value = std::getenv(name)) {  // NOLINT(concurrency-mt-unsafe): nothing sets the environment
    env[name] = value;
  }
}

}  // namespace

std::map<std::string, std::string> networkEnv(const std::string& scratch) {
  std::map<std::string, std::string> env = {{"HOME", scratch},
                                            {"XDG_CACHE_HOME", scratch + "/cache"},
                                            {"XDG_CONFIG_HOME", scratch + "/config"},
                                            {"XDG_DATA_HOME", scratch + "/data"},
                                            {"HELM_CACHE_HOME", scratch + "/helm/cache"},
                                            {"HELM_CONFIG_HOME", scratch + "/helm/config"},
                                            {"HELM_DATA_HOME", scratch + "/helm/data"},
                                            {"GIT_TERMINAL_PROMPT", "0"},
                                            {"KUBECONFIG", scratch + "/no-kubeconfig"}};
  for (const char* name : kInherited) {
    inherit(env, name);
  }
  for (const char* name : kProxies) {
    inherit(env, name);
  }
  return env;
}

std::map<std::string, std::string> sandboxEnv(const std::string& scratch) {
  const std::string closed = "http://127.0.0.1:9";
  auto env = networkEnv(scratch);
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) {
    env[name] = closed;
  }
  env["NO_PROXY"] = "";
  env["no_proxy"] = "";
  return env;
}

std::string lastLines(std::string_view text, size_t max_chars) {
  std::string out = trim(text);
  if (out.size() > max_chars) {
    out = "..." + out.substr(out.size() - max_chars);
  }
  return out;
}

Result<CommandResult> run(const std::string& binary, std::vector<std::string> args, const std::string& scratch,
                          const RenderLimits& limits, const std::string& what, Network network, std::string input) {
  args.insert(args.begin(), binary);
  auto result = runCommand({.argv = std::move(args),
                            .env = network == Network::kAllowed ? networkEnv(scratch) : sandboxEnv(scratch),
                            .inherit_env = false,
                            .cwd = scratch,
                            .input = std::move(input),
                            .timeout = limits.timeout,
                            .max_output_bytes = limits.max_output_bytes + (1u << 20)});
  if (!result.ok()) {
    return fail(ErrorKind::kInternal, "cannot run " + binary + ": " + result.error().message, what);
  }
  return result;
}

std::string withoutRoot(std::string text, const std::string& root) {
  const std::string prefix = root + "/";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
    text.erase(at, prefix.size());
  }
  return text;
}

std::string scrub(std::string text, const std::string& secret) {
  if (secret.empty()) {
    return text;
  }
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "[REDACTED]");
  }
  return text;
}

bool isDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(fs::status(path, ec));
}

Status checkLinksInside(const std::string& root, const std::string& relative) {
  std::error_code ec;
  const std::string base = root + "/" + relative;
  for (fs::recursive_directory_iterator it(base, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_symlink(ec)) {
      continue;
    }
    const std::string link = joinRelative(relative, it->path().lexically_relative(base).string());
    if (!source::resolveInside(root, link).ok()) {
      return fail(ErrorKind::kInvalid, link + ": symlink resolves outside the repository checkout", link);
    }
  }
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot list " + relative + ": " + ec.message(), "recursive_directory_iterator");
  }
  return {};
}

}  // namespace detail

std::string findExecutable(std::string_view name) {
  auto executable = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.empty()) {
    return {};
  }
  if (name.find('/') != std::string_view::npos) {
    return executable(std::string(name)) ? std::string(name) : std::string();
  }
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): nothing sets the environment
  for (const auto& dir : split(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + std::string(name);
    if (executable(candidate)) {
      return candidate;
    }
  }
  return {};
}

}  // namespace flotilla::render
