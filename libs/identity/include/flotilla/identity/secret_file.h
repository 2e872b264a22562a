// flotilla/identity/secret_file.h
//
// Writing secrets (nkey seeds, .creds files, private keys): the file is created with mode 0600 from the start
// (core's writeFile applies the mode after writing, so a secret would briefly be readable under a loose umask),
// written to a temp name and renamed into place.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::identity {

//! Creates or replaces `path` with `content`, mode 0600. kPermanent names the path and the OS error.
Status writeSecretFile(const std::string& path, std::string_view content);

}  // namespace flotilla::identity
