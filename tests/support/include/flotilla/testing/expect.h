// flotilla/testing/expect.h
//
// Expectations shared by the unit tests of several libraries.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace flotilla::testing {

//! Expects `message` to contain each of `parts`: a decoder that reports every problem at once names them all.
inline void expectMentionsAll(const std::string& message, std::initializer_list<std::string_view> parts) {
  for (auto part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "no \"" << part << "\" in:\n" << message;
  }
}

}  // namespace flotilla::testing
