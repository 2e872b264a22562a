// YAML -> Json (libs/core yaml.h): every document of a stream, with and without field lines, under limits small
// enough that an alias bomb is refused within a few milliseconds. A converted value must print as YAML and JSON, and
// its JSON must parse back to the same JSON.
#include <cstddef>
#include <cstdint>

#include "flotilla/core/json.h"
#include "flotilla/core/yaml.h"
#include "fuzz_support.h"

namespace {

flotilla::YamlLimits limits(bool record_lines) {
  flotilla::YamlLimits limits;
  limits.max_nodes = 20'000;
  limits.max_expanded_bytes = 256u << 10;
  limits.record_lines = record_lines;
  return limits;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flotilla::fuzz::check;
  std::string_view text = flotilla::fuzz::asText(data, size);
  bool record_lines = size > 0 && (data[0] & 1) != 0;
  auto documents = flotilla::parseYamlDocuments(text, "fuzz.yaml", limits(record_lines));
  if (!documents.ok()) {
    check(!documents.error().message.empty(), "a YAML error has a message");
    return 0;
  }
  for (const auto& document : *documents) {
    for (const auto& [path, line] : document.lines) {
      (void)document.lineOf(path);
      (void)flotilla::yamlParentPath(path);
    }
    (void)flotilla::toYaml(document.value);
    std::string json = document.value.dump();
    auto reparsed = flotilla::Json::parse(json);
    check(reparsed.ok(), "the JSON of a YAML document parses", json);
    // Not value equality: JSON has no infinity (.inf is written as null), so compare the canonical texts.
    check(reparsed->dump() == json, "the JSON of a YAML document reads back as the same JSON", json);
  }
  (void)flotilla::parseYaml(text, "fuzz.yaml", limits(false));
  return 0;
}
