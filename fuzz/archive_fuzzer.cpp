// Source archives (libs/source archive.h), the JSON the poller stores and the bundler extracts. Properties: an
// accepted archive has only safe relative paths, and encodes to the text that decodes to the same archive (its
// object name is content-addressed, so the encoding must be canonical).
#include <cstddef>
#include <cstdint>

#include "flotilla/source/archive.h"
#include "fuzz_support.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flotilla::fuzz::check;
  namespace source = flotilla::source;
  std::string_view text = flotilla::fuzz::asText(data, size);
  (void)source::isSafeRelativePath(text);
  auto archive = source::decode(text);
  if (!archive.ok()) {
    check(!archive.error().message.empty(), "an archive error has a message");
    return 0;
  }
  for (const auto& file : archive->files) {
    check(source::isSafeRelativePath(file.path), "a decoded file path is safe", file.path);
  }
  for (const auto& link : archive->symlinks) {
    check(source::isSafeRelativePath(link.path), "a decoded symlink path is safe", link.path);
  }
  (void)archive->contentBytes();
  std::string encoded = source::encode(*archive);
  auto again = source::decode(encoded);
  check(again.ok(), "an encoded archive decodes", again.ok() ? encoded : again.error().message);
  check(source::encode(*again) == encoded, "an encoded archive encodes to the same text after decoding", encoded);
  (void)source::objectName(encoded);
  return 0;
}
