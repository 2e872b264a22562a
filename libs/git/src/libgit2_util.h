// libgit2 at the boundary: one-time initialization, RAII handles, and turning a failed call into an Error
// (through toError in errors.cpp, the only mapping). Private to libs/git.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <git2.h>

#include "flotilla/core/result.h"
#include "flotilla/git/errors.h"

namespace flotilla::git::detail {

//! git_libgit2_init exactly once per process (thread-safe); libgit2 stays initialized until exit.
void ensureInit();

struct GitDeleter {
  void operator()(git_repository* p) const { git_repository_free(p); }
  void operator()(git_remote* p) const { git_remote_free(p); }
  void operator()(git_object* p) const { git_object_free(p); }
  void operator()(git_commit* p) const { git_commit_free(p); }
  void operator()(git_tree* p) const { git_tree_free(p); }
  void operator()(git_tree_entry* p) const { git_tree_entry_free(p); }
  void operator()(git_blob* p) const { git_blob_free(p); }
  void operator()(git_reference* p) const { git_reference_free(p); }
  void operator()(git_reference_iterator* p) const { git_reference_iterator_free(p); }
  void operator()(git_buf* p) const { git_buf_dispose(p); }
};
template <typename T>
using GitPtr = std::unique_ptr<T, GitDeleter>;

//! The failed call described with git_error_last(); `function` names the libgit2 call.
GitFailure lastFailure(int code, std::string_view function);

//! Error for a failed local (non-network) call; `context` is prepended to libgit2's message.
Error localError(int code, std::string_view function, std::string_view context = {});

std::string oidHex(const git_oid& oid);

}  // namespace flotilla::git::detail
