// What the events tests share: the documented JSON examples under docs/events, and checking that a decode failed
// with a given problem.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/core/util.h"

namespace flotilla::events::test {

//! docs/events of the source tree (FLOTILLA_SOURCE_DIR when set, else the configured one).
inline std::string docsDir() {
  if (const char* source = std::getenv("FLOTILLA_SOURCE_DIR"); source != nullptr && *source != '\0') {
    return std::string(source) + "/docs/events";
  }
  return FLOTILLA_EVENTS_DOCS_DIR;
}

//! The ```json examples of docs/events/<file>, in order; a file or example that cannot be read is a failure.
inline std::vector<Json> jsonExamples(const std::string& file) {
  auto text = readFile(docsDir() + "/" + file);
  EXPECT_TRUE(text.ok()) << file << ": " << (text.ok() ? "" : text.error().describe());
  std::vector<Json> out;
  if (!text.ok()) {
    return out;
  }
  const std::string open = "```json\n";
  size_t pos = 0;
  while ((pos = text->find(open, pos)) != std::string::npos) {
    size_t start = pos + open.size();
    size_t end = text->find("```", start);
    if (end == std::string::npos) {
      ADD_FAILURE() << file << ": unterminated code block";
      break;
    }
    auto json = Json::parse(std::string_view(*text).substr(start, end - start));
    EXPECT_TRUE(json.ok()) << file << ": " << (json.ok() ? "" : json.error().describe());
    if (json.ok()) {
      out.push_back(std::move(json).value());
    }
    pos = end + 3;
  }
  return out;
}

//! `result` failed, and its message names `problem` ("Kind.field: message").
template <typename T>
void expectProblem(const Result<T>& result, std::string_view problem) {
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find(problem), std::string::npos) << result.error().message;
}

}  // namespace flotilla::events::test
