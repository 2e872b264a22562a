// cli/src/view_util.h
//
// What the view builders (views.cpp), the tables (views_table.cpp) and the describe text (views_describe.cpp)
// share: reading a view's common fields, short text forms, times, and a plain text table.
#pragma once

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"

namespace flotilla::cli::detail {

//! `value`, or an empty object when null.
const Json& orEmpty(const Json* value);
//! "manifest:options" shortened to 12 + 8 characters.
std::string shortId(std::string_view id, size_t n = 12);
//! One line of at most `n` characters.
std::string truncate(std::string text, size_t n);
//! The non-empty parts joined with "; ".
std::string joinMessages(const std::vector<std::string>& parts);
//! "k=v,k2=v2" or "<none>".
std::string labelsText(const Json* labels);
std::string orDash(const std::string& text);
//! The newest of several RFC 3339 times (by parsed value).
std::string newest(std::initializer_list<std::string> times);

std::string workspaceOf(const Json& view);
std::string nameOf(const Json& view);
const Json& statusOf(const Json& view);
const Json& displayOf(const Json& view);
//! "State: message" of a view's display, or "-".
std::string statusText(const Json& display);

//! Columns padded to the widest cell, three spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  [[nodiscard]] std::string str() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace flotilla::cli::detail
