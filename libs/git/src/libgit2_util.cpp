#include "libgit2_util.h"

#include <mutex>

#include "deadline_stream.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::git::detail {

void ensureInit() {
  static std::once_flag once;
  std::call_once(once, [] {
    git_libgit2_init();
    // Every TCP connection gets the operation's deadline (libgit2 1.5 has no server timeouts of its own).
    if (registerDeadlineStream() < 0) {
      log::error("cannot register the git socket stream with deadlines; a silent server can block a git call",
                 {{"error", lastFailure(-1, "git_stream_register").message}});
    }
  });
}

GitFailure lastFailure(int code, std::string_view function) {
  GitFailure failure;
  failure.code = code;
  failure.function = std::string(function);
  if (const git_error* last = git_error_last(); last != nullptr && last->message != nullptr) {
    failure.error_class = last->klass;
    failure.message = trim(last->message);
  }
  return failure;
}

Error localError(int code, std::string_view function, std::string_view context) {
  GitFailure failure = lastFailure(code, function);
  if (!context.empty()) {
    failure.message = std::string(context) + (failure.message.empty() ? "" : ": " + failure.message);
  }
  return toError(failure);
}

std::string oidHex(const git_oid& oid) {
  char buffer[GIT_OID_HEXSZ + 1];
  git_oid_tostr(buffer, sizeof buffer, &oid);
  return buffer;
}

}  // namespace flotilla::git::detail
