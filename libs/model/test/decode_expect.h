// What the model tests share: a document with one edit made to it, and expectations on a decode that must fail.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "flotilla/core/result.h"
#include "flotilla/testing/expect.h"

namespace flotilla::model::test {

//! `text` with its first `from` replaced by `to`; a `from` that is not there fails the test (`text` stays as it is).
inline std::string replacedOnce(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no \"" << from << "\" in:\n" << text;
  if (at != std::string::npos) {
    text.replace(at, from.size(), to);
  }
  return text;
}

//! `result` failed, and its message mentions each of `parts`.
template <typename T>
void expectRejected(const Result<T>& result, std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(result.ok());
  flotilla::testing::expectMentionsAll(result.error().message, parts);
}

//! `result` failed with exactly `message`.
template <typename T>
void expectRejectedWith(const Result<T>& result, std::string_view message) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, message);
}

}  // namespace flotilla::model::test
