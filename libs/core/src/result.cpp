#include "flotilla/core/result.h"

#include <array>

namespace flotilla {

std::string_view errorKindName(ErrorKind kind) {
  static constexpr std::array<std::string_view, 8> kNames = {"Transient", "Invalid",   "NotFound", "Conflict",
                                                             "Wait",      "Permanent", "Internal", "StoreFull"};
  auto index = static_cast<size_t>(kind);
  return index < kNames.size() ? kNames[index] : "Unknown";
}

std::string Error::describe() const {
  // Decoders put "file:line: " in front of the message itself (the form editors jump to); do not repeat it.
  if (where.empty() || message.compare(0, where.size(), where) == 0) {
    return message;
  }
  return message + " (" + where + ")";
}

}  // namespace flotilla
