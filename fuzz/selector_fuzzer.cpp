// Label selectors (libs/model labels.h): the string form (the CLI's -l) and, when the input is JSON, the structured
// form of GitRepo targets. Properties: a parsed selector prints in a form that parses back and prints the same; a
// decoded structured selector encodes to one that decodes to the same value; matching never fails.
#include <cstddef>
#include <cstdint>

#include "flotilla/core/json.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"
#include "fuzz_support.h"

namespace {

using flotilla::fuzz::check;
namespace model = flotilla::model;

void matchSamples(const model::LabelSelector& selector) {
  static const model::Labels kSamples[] = {
      {},
      {{"env", "prod"}, {"region", "eu"}},
      {{"app.kubernetes.io/name", "web"}, {"tier", ""}},
  };
  for (const auto& labels : kSamples) {
    (void)selector.matches(labels);
  }
  (void)model::validateSelector(selector, "selector");
}

void stringForm(std::string_view text) {
  auto parsed = model::parseSelector(text);
  if (!parsed.ok()) {
    check(!parsed.error().message.empty(), "a selector error has a message");
    return;
  }
  matchSamples(*parsed);
  std::string printed = model::formatSelector(*parsed);
  auto reparsed = model::parseSelector(printed);
  check(reparsed.ok(), "a printed selector parses", printed + (reparsed.ok() ? "" : "\n" + reparsed.error().message));
  check(model::formatSelector(*reparsed) == printed, "a printed selector prints the same after parsing", printed);
  check(*reparsed == *parsed, "a printed selector parses to the same selector", printed);
}

void structuredForm(std::string_view text) {
  auto json = flotilla::Json::parse(text);
  if (!json.ok()) {
    return;
  }
  auto decoded = model::decodeSelector(*json);
  if (!decoded.ok()) {
    return;
  }
  matchSamples(*decoded);
  flotilla::Json encoded = model::encodeSelector(*decoded);
  auto again = model::decodeSelector(encoded);
  check(again.ok() && *again == *decoded, "an encoded selector decodes to the same value", encoded.dump());
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = flotilla::fuzz::asText(data, size);
  stringForm(text);
  structuredForm(text);
  for (std::string_view part :
       {flotilla::fuzz::splitOnce(text, "=").first, flotilla::fuzz::splitOnce(text, "=").second}) {
    (void)model::validateLabelKey(part);
    (void)model::validateLabelValue(part);
    (void)model::isDns1123Subdomain(part);
    (void)model::isDns1123Label(part);
  }
  return 0;
}
