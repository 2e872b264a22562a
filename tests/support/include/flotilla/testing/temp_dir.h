// flotilla/testing/temp_dir.h: a temp dir that lives as long as a test fixture.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"

namespace flotilla::testing {

//! Makes a fresh temp dir (the test fails if it cannot) and removes it with everything in it when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    auto made = makeTempDir(prefix);
    EXPECT_TRUE(made.ok()) << prefix << ": " << (made.ok() ? "" : made.error().describe());
    path_ = made.valueOr("");
  }
  ~TempDir() {
    if (!path_.empty()) {
      removeAll(path_);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace flotilla::testing
