// fleet.yaml text -> FleetYaml (libs/model decodeFleetYaml: YAML, then the strict option decoder). Property: an
// accepted fleet.yaml encodes to a form that decodes to the same FleetYaml (encode documents the round trip).
#include <cstddef>
#include <cstdint>

#include "flotilla/model/codec.h"
#include "fuzz_support.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flotilla::fuzz::check;
  auto decoded = flotilla::model::decodeFleetYaml(flotilla::fuzz::asText(data, size), "fuzz/fleet.yaml");
  if (!decoded.ok()) {
    check(!decoded.error().message.empty(), "a fleet.yaml error has a message");
    return 0;
  }
  flotilla::Json encoded = flotilla::model::encode(*decoded);
  auto again = flotilla::model::decodeFleetYamlValue(encoded, "encoded");
  check(again.ok(), "an encoded fleet.yaml decodes", again.ok() ? encoded.dump() : again.error().message);
  check(*again == *decoded, "an encoded fleet.yaml decodes to the same value", encoded.dump());
  return 0;
}
