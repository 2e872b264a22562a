// flotilla/testing/json.h: JSON written in a test.
#pragma once

#include <string_view>

#include <gtest/gtest.h>

#include "flotilla/core/json.h"

namespace flotilla::testing {

//! `text` parsed; a test failure naming the text (and null) when it is not JSON.
inline Json parseJson(std::string_view text) {
  auto parsed = Json::parse(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed.ok() ? *parsed : Json();
}

}  // namespace flotilla::testing
