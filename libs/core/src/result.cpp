#include "flotilla/core/result.h"

namespace flotilla {

std::string_view errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTransient:
      return "Transient";
    case ErrorKind::kInvalid:
      return "Invalid";
    case ErrorKind::kNotFound:
      return "NotFound";
    case ErrorKind::kConflict:
      return "Conflict";
    case ErrorKind::kWait:
      return "Wait";
    case ErrorKind::kPermanent:
      return "Permanent";
    case ErrorKind::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Error::describe() const {
  // Decoders put "file:line: " in front of the message itself (the form editors jump to); do not repeat it.
  if (where.empty() || message.compare(0, where.size(), where) == 0) {
    return message;
  }
  return message + " (" + where + ")";
}

}  // namespace flotilla
