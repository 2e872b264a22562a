// Kubeconfig text (libs/kube kubeconfig.h): parsed with relative file references resolved against an empty
// directory, so only inline data and absolute paths can be read; the input's first line is also parsed as a
// server URL on its own.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "flotilla/kube/kubeconfig.h"
#include "fuzz_support.h"

namespace {

const std::string& emptyDir() {
  static const std::string dir = [] {
    auto path = std::filesystem::temp_directory_path() / "flotilla-kubeconfig-fuzz";
    std::filesystem::create_directories(path);
    return path.string();
  }();
  return dir;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace kube = flotilla::kube;
  std::string_view text = flotilla::fuzz::asText(data, size);
  auto config = kube::Kubeconfig::parse(text, emptyDir(), "fuzz-kubeconfig");
  if (config.ok()) {
    flotilla::fuzz::check(!config->host.empty(), "a parsed kubeconfig has a host", config->server);
    (void)config->hostPort();
  }
  kube::Kubeconfig from_url;
  (void)kube::parseServerUrl(flotilla::fuzz::splitOnce(text, "\n").first, from_url);
  return 0;
}
