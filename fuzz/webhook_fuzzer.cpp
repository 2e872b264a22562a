// Git host push webhooks (services/poller webhook.h, pure functions): the input is a request as text, header lines
// "Name: value" up to an empty line, then the body. Headers go through provider detection and signature checks, the
// body through every provider's payload parser, and each parsed push is matched against GitRepo specs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"
#include "flotilla/poller/webhook.h"
#include "fuzz_support.h"

namespace {

namespace poller = flotilla::poller;
using flotilla::fuzz::splitOnce;

flotilla::http::Request requestOf(std::string_view text) {
  auto [head, body] = splitOnce(text, "\n\n");
  flotilla::http::Request request;
  request.method = "POST";
  request.path = "/webhook";
  request.body = std::string(body);
  while (!head.empty()) {
    auto [line, rest] = splitOnce(head, "\n");
    head = rest;
    auto [name, value] = splitOnce(line, ":");
    request.headers[flotilla::toLowerAscii(flotilla::trim(name))] = flotilla::trim(value);
  }
  return request;
}

void matchSpecs(const poller::PushEvent& push) {
  std::vector<flotilla::model::GitRepoSpec> specs(3);
  specs[0].repo = push.repo_urls.empty() ? "https://github.com/org/app" : push.repo_urls.front();
  specs[1] = specs[0];
  specs[1].branch = "main";
  specs[2] = specs[0];
  specs[2].revision = push.refs.empty() ? "v1" : push.refs.front().ref;
  for (const auto& spec : specs) {
    (void)poller::pushMatches(spec, push);
    (void)poller::pushedCommitFor(spec, push);
  }
  for (const auto& url : push.repo_urls) {
    (void)poller::webhookRepoKey(url);
  }
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const poller::WebhookSecret kSecret = {
      {"github", "s3cret"}, {"token", "t0ken"}, {"azure-username", "user"}, {"azure-password", "pass"}};
  const flotilla::http::Request request = requestOf(flotilla::fuzz::asText(data, size));
  if (auto detected = poller::detectProvider(request)) {
    std::string why;
    if (!poller::verifyWebhook(*detected, request, kSecret, why)) {
      flotilla::fuzz::check(!why.empty(), "a refused signature says why");
    }
  }
  for (int p = 0; p <= static_cast<int>(poller::WebhookProvider::kGeneric); ++p) {
    auto push = poller::parsePush(static_cast<poller::WebhookProvider>(p), request);
    if (push.ok()) {
      matchSpecs(*push);
    }
  }
  (void)poller::webhookRepoKey(request.body);
  return 0;
}
