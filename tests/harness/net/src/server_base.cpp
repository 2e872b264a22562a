#include "flotilla/harness/server_base.h"

#include <cstdlib>

#include "flotilla/core/util.h"

namespace flotilla::harness {

ServerBase::~ServerBase() {
  if (!dir_.empty() && std::getenv("FLOTILLA_KEEP_TEST_DIRS") == nullptr &&
      std::getenv("FLOTILLA_KEEP_TEMP") == nullptr) {
    removeAll(dir_);
  }
}

Status ServerBase::makeDir(std::string_view prefix) {
  auto dir = makeTempDir(prefix);
  if (!dir.ok()) {
    return fail(dir.error());
  }
  dir_ = *dir;
  return {};
}

}  // namespace flotilla::harness
