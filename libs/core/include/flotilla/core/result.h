// flotilla/core/result.h
//
// The error model shared by every Flotilla library and service. Anticipated failures are returned, never
// thrown: a Result<T> holds either a value or an Error, and the Error's kind tells the caller what to do next.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace flotilla {

//! What the caller should do about a failure. Handlers map these to bus actions: Transient -> nak with
//! backoff, Invalid/Permanent -> term and report, Wait -> redeliver later without counting as a failure.
enum class ErrorKind {
  kTransient,  //!< network, timeout, server unavailable: retry later with backoff
  kInvalid,    //!< bad input from a user (YAML, schema, path): give up and report it
  kNotFound,   //!< the thing asked for does not exist
  kConflict,   //!< an optimistic-concurrency or field-ownership conflict
  kWait,       //!< a precondition is not met yet (dependency, CRD not established): come back later
  kPermanent,  //!< anything else that retrying will not fix (auth rejected, unsupported): report it
  kInternal,   //!< a bug or an unexpected library failure
  //! A store (stream, KV bucket, object store) reached its size cap: retry with backoff, never give the work up;
  //! it proceeds once space is freed (garbage collection, a larger cap). The message names the store.
  kStoreFull,
};

std::string_view errorKindName(ErrorKind kind);

//! A failure with the kind that decides the next step, a human message, and where it came from
//! (the library call or file and line), kept apart so logs can show both.
struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  std::string where;

  //! "message (where)", or just the message when `where` is empty or the message already starts with it.
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] bool retryable() const {
    return kind == ErrorKind::kTransient || kind == ErrorKind::kWait || kind == ErrorKind::kStoreFull;
  }
};

//! Builds an Error; `where` is optional context such as "natsConnection_Connect" or "fleet.yaml:12".
inline Error makeError(ErrorKind kind, std::string message, std::string where = {}) {
  return Error{kind, std::move(message), std::move(where)};
}

//! Wrapper that lets a function `return fail(...)` from any Result<T>.
struct Failure {
  Error error;
};
inline Failure fail(ErrorKind kind, std::string message, std::string where = {}) {
  return Failure{makeError(kind, std::move(message), std::move(where))};
}
inline Failure fail(Error error) {
  return Failure{std::move(error)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Failure failure) : state_(std::in_place_index<1>, std::move(failure.error)) {}  // NOLINT

  [[nodiscard]] bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T valueOr(T fallback) const { return ok() ? std::get<0>(state_) : std::move(fallback); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Failure failure) : error_(std::move(failure.error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;
inline Status okStatus() {
  return {};
}

}  // namespace flotilla

//! Returns the error of `expr` (a Result) from the enclosing function if it failed.
#define FLOTILLA_TRY(expr)                                   \
  do {                                                       \
    auto&& flotilla_try_result_ = (expr);                    \
    if (!flotilla_try_result_.ok()) {                        \
      return ::flotilla::fail(flotilla_try_result_.error()); \
    }                                                        \
  } while (0)
