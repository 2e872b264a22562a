// flotilla/core/errno_text.h
//
// The message of an errno value, thread-safe: std::strerror may return a buffer another thread overwrites
// (clang-tidy concurrency-mt-unsafe), strerror_r does not.
#pragma once

#include <string>

namespace flotilla {

//! "No such file or directory" for ENOENT; "errno <n>" when the C library has no message.
std::string errnoText(int error);

}  // namespace flotilla
