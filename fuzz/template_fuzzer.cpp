// Fleet's `${ }` templating (libs/template): the input is a template, rendered and evaluated as a typed value over
// the context fleet.yaml values see, under limits a few times tighter than the defaults so a bomb is refused fast.
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "flotilla/core/json.h"
#include "flotilla/template/template.h"
#include "fuzz_support.h"

namespace {

using flotilla::Json;

const Json& context() {
  static const Json value = Json::obj({
      {"ClusterName", "prod-eu-1"},
      {"ClusterNamespace", "fleet-default"},
      {"ClusterLabels", Json::obj({{"env", "prod"}, {"region", "eu-west-1"}, {"replicas", "3"}})},
      {"ClusterAnnotations", Json::obj({{"owner", "team-a"}})},
      {"ClusterValues", Json::obj({{"replicas", 3},
                                   {"ratio", 0.5},
                                   {"enabled", true},
                                   {"none", nullptr},
                                   {"list", Json(Json::Array{Json("a"), Json(2), Json(false)})},
                                   {"nested", Json::obj({{"key", "value"}})}})},
  });
  return value;
}

flotilla::templating::Limits limits() {
  flotilla::templating::Limits limits;
  limits.max_output_bytes = 64u << 10;
  limits.max_steps = 10'000;
  limits.max_time = std::chrono::milliseconds(250);
  return limits;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flotilla::fuzz::check;
  std::string_view text = flotilla::fuzz::asText(data, size);
  (void)flotilla::templating::hasTemplate(text);
  auto rendered = flotilla::templating::render(text, context(), limits());
  if (rendered.ok()) {
    check(rendered->size() <= limits().max_output_bytes, "rendered text stays within the output limit");
  } else {
    check(!rendered.error().message.empty(), "a template error has a message");
  }
  (void)flotilla::templating::evaluateValue(text, context(), limits());
  return 0;
}
