// flotilla/core/c_handle.h
//
// Owning pointers to the handles of C libraries (OpenSSL, libnats, PCRE2): `CHandle<EVP_PKEY, EVP_PKEY_free>` is a
// std::unique_ptr that releases its handle with the library's own function.
#pragma once

#include <memory>

namespace flotilla {

//! A std::unique_ptr deleter that releases a non-null handle with the C library's `Free`.
template <auto Free>
struct FreeWith {
  template <typename T>
  void operator()(T* handle) const {
    if (handle != nullptr) {
      Free(handle);
    }
  }
};

//! A std::unique_ptr to a C library's `T`, released with `Free`.
template <typename T, auto Free>
using CHandle = std::unique_ptr<T, FreeWith<Free>>;

}  // namespace flotilla
