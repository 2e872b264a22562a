#include "reader.h"

namespace flotilla::events::detail {

PayloadReader::PayloadReader(const Json& json, std::string_view kind)
    : reader_(json, std::string(kind), problems_), kind_(kind) {
  std::string api_version;
  std::string actual_kind;
  reader_.str("apiVersion", api_version, true);
  reader_.str("kind", actual_kind, true);
  if (!api_version.empty() && api_version != kApiVersion) {
    reader_.fail(reader_.pathOf("apiVersion"),
                 "unsupported apiVersion \"" + api_version + "\" (expected " + std::string(kApiVersion) + ")");
  }
  if (!actual_kind.empty() && actual_kind != kind) {
    reader_.fail(reader_.pathOf("kind"), "expected " + std::string(kind) + ", got \"" + actual_kind + "\"");
  }
}

void PayloadReader::header(std::string& id, std::string& time) {
  reader_.str("id", id, true);
  reader_.str("time", time, true);
  if (!time.empty() && !isRfc3339(time)) {
    reader_.fail(reader_.pathOf("time"),
                 "expected an RFC 3339 time such as \"2026-12-02T10:00:00Z\", got \"" + time + "\"");
  }
}

Status PayloadReader::finish() {
  reader_.finish();
  return problemsStatus(problems_, kind_);
}

}  // namespace flotilla::events::detail
