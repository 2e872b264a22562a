#include "flotilla/model/labels.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace flotilla::model {
namespace {

bool isAlnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool isLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// [A-Za-z0-9] at both ends, [A-Za-z0-9._-] inside, 1..63 chars: a label name or value.
bool isQualifiedName(std::string_view s) {
  if (s.empty() || s.size() > 63 || !isAlnum(s.front()) || !isAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return isAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

std::string prefixed(std::string_view path, const std::string& message) {
  return path.empty() ? message : std::string(path) + ": " + message;
}

}  // namespace

bool isDns1123Label(std::string_view name) {
  if (name.empty() || name.size() > 63 || !isLowerAlnum(name.front()) || !isLowerAlnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) { return isLowerAlnum(c) || c == '-'; });
}

bool isDns1123Subdomain(std::string_view name) {
  if (name.empty() || name.size() > 253 || !isLowerAlnum(name.front()) || !isLowerAlnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) { return isLowerAlnum(c) || c == '-' || c == '.'; });
}

Status validateLabelKey(std::string_view key) {
  std::string_view name = key;
  if (size_t slash = key.find('/'); slash != std::string_view::npos) {
    std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (!isDns1123Subdomain(prefix)) {
      return fail(ErrorKind::kInvalid,
                  "invalid label key " + quoted(key) + ": the prefix must be a lower-case DNS subdomain (RFC 1123)");
    }
  }
  if (!isQualifiedName(name)) {
    return fail(ErrorKind::kInvalid, "invalid label key " + quoted(key) +
                                         ": the name must be 1-63 characters of [A-Za-z0-9._-], starting and ending "
                                         "with a letter or digit");
  }
  return okStatus();
}

Status validateLabelValue(std::string_view value) {
  if (!value.empty() && !isQualifiedName(value)) {
    return fail(ErrorKind::kInvalid, "invalid label value " + quoted(value) +
                                         ": must be empty or 1-63 characters of [A-Za-z0-9._-], starting and ending "
                                         "with a letter or digit");
  }
  return okStatus();
}

Status validateLabels(const Labels& labels, std::string_view path) {
  for (const auto& [key, value] : labels) {
    if (auto s = validateLabelKey(key); !s.ok()) {
      return fail(ErrorKind::kInvalid, prefixed(path, s.error().message));
    }
    if (auto s = validateLabelValue(value); !s.ok()) {
      return fail(ErrorKind::kInvalid, prefixed(path, s.error().message + " (key " + quoted(key) + ")"));
    }
  }
  return okStatus();
}

std::string_view operatorName(SelectorOperator op) {
  static constexpr std::array<std::string_view, 4> kNames = {"In", "NotIn", "Exists", "DoesNotExist"};
  auto index = static_cast<size_t>(op);
  return index < kNames.size() ? kNames[index] : "Unknown";
}

Result<SelectorOperator> parseOperator(std::string_view name) {
  for (auto op :
       {SelectorOperator::kIn, SelectorOperator::kNotIn, SelectorOperator::kExists, SelectorOperator::kDoesNotExist}) {
    if (operatorName(op) == name) {
      return op;
    }
  }
  return fail(ErrorKind::kInvalid, "unknown operator " + quoted(name) + " (one of In, NotIn, Exists, DoesNotExist)");
}

bool LabelSelector::matches(const Labels& labels) const {
  for (const auto& [key, value] : match_labels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) {
      return false;
    }
  }
  for (const auto& req : match_expressions) {
    auto it = labels.find(req.key);
    bool has = it != labels.end();
    bool listed = has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    bool holds = false;
    switch (req.op) {
      case SelectorOperator::kIn:
      case SelectorOperator::kNotIn:
        holds = listed == (req.op == SelectorOperator::kIn);
        break;
      case SelectorOperator::kExists:
      case SelectorOperator::kDoesNotExist:
        holds = has == (req.op == SelectorOperator::kExists);
        break;
    }
    if (!holds) {
      return false;
    }
  }
  return true;
}

Status validateSelector(const LabelSelector& selector, std::string_view path) {
  std::string base(path);
  auto at = [&](const std::string& suffix) { return base.empty() ? suffix : base + "." + suffix; };
  if (auto s = validateLabels(selector.match_labels, at("matchLabels")); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < selector.match_expressions.size(); ++i) {
    const auto& req = selector.match_expressions[i];
    std::string where = at("matchExpressions[" + std::to_string(i) + "]");
    if (auto s = validateLabelKey(req.key); !s.ok()) {
      return fail(ErrorKind::kInvalid, where + ".key: " + s.error().message);
    }
    bool needs_values = req.op == SelectorOperator::kIn || req.op == SelectorOperator::kNotIn;
    if (needs_values && req.values.empty()) {
      return fail(ErrorKind::kInvalid,
                  where + ": operator " + std::string(operatorName(req.op)) + " needs at least one value");
    }
    if (!needs_values && !req.values.empty()) {
      return fail(ErrorKind::kInvalid,
                  where + ": operator " + std::string(operatorName(req.op)) + " must not have values");
    }
    for (const auto& value : req.values) {
      if (auto s = validateLabelValue(value); !s.ok()) {
        return fail(ErrorKind::kInvalid, where + ".values: " + s.error().message);
      }
    }
  }
  return okStatus();
}

namespace {

// A small tokenizer for the Kubernetes selector grammar (k8s.io/apimachinery/pkg/labels.Parse).
class SelectorParser {
 public:
  explicit SelectorParser(std::string_view text) : text_(text) {}

  Result<LabelSelector> parse() {
    LabelSelector selector;
    skipSpace();
    if (pos_ == text_.size()) {
      return selector;
    }
    while (true) {
      auto added = parseRequirement(selector);
      if (!added.ok()) {
        return fail(added.error());
      }
      skipSpace();
      if (pos_ == text_.size()) {
        break;
      }
      if (text_[pos_] != ',') {
        return error("expected ',' between requirements");
      }
      ++pos_;
      skipSpace();
    }
    if (auto s = validateSelector(selector); !s.ok()) {
      return fail(ErrorKind::kInvalid, "invalid selector \"" + std::string(text_) + "\": " + s.error().message);
    }
    return selector;
  }

 private:
  Failure error(const std::string& message) const {
    return fail(ErrorKind::kInvalid, "invalid selector \"" + std::string(text_) + "\" at position " +
                                         std::to_string(pos_ + 1) + ": " + message);
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) {
      ++pos_;
    }
  }

  static bool isWordChar(char c) { return isAlnum(c) || c == '.' || c == '_' || c == '-' || c == '/'; }

  std::string word() {
    size_t start = pos_;
    while (pos_ < text_.size() && isWordChar(text_[pos_])) {
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  bool consume(std::string_view token) {
    if (text_.substr(pos_, token.size()) == token) {
      pos_ += token.size();
      return true;
    }
    return false;
  }

  Result<std::vector<std::string>> valueSet() {
    skipSpace();
    if (!consume("(")) {
      return error("expected '(' after in/notin");
    }
    std::vector<std::string> values;
    while (true) {
      skipSpace();
      std::string value = word();
      skipSpace();
      values.push_back(value);
      if (consume(")")) {
        break;
      }
      if (!consume(",")) {
        return error("expected ',' or ')' in value list");
      }
    }
    if (values.size() == 1 && values.front().empty()) {
      return error("empty value list");
    }
    return values;
  }

  Status parseRequirement(LabelSelector& selector) {
    if (consume("!")) {
      skipSpace();
      std::string key = word();
      if (key.empty()) {
        return error("expected a label key after '!'");
      }
      selector.match_expressions.push_back({key, SelectorOperator::kDoesNotExist, {}});
      return okStatus();
    }
    std::string key = word();
    if (key.empty()) {
      return error("expected a label key");
    }
    skipSpace();
    if (pos_ == text_.size() || text_[pos_] == ',') {
      selector.match_expressions.push_back({key, SelectorOperator::kExists, {}});
      return okStatus();
    }
    if (consume("!=")) {
      skipSpace();
      selector.match_expressions.push_back({key, SelectorOperator::kNotIn, {word()}});
      return okStatus();
    }
    if (consume("==") || consume("=")) {
      skipSpace();
      std::string value = word();
      if (!selector.match_labels.contains(key)) {
        selector.match_labels.emplace(key, value);
      } else {
        selector.match_expressions.push_back({key, SelectorOperator::kIn, {value}});
      }
      return okStatus();
    }
    if (text_[pos_] == '>' || text_[pos_] == '<') {
      return error("the operators > and < are not supported in label selectors here");
    }
    std::string op = word();
    if (op == "in" || op == "notin") {
      auto values = valueSet();
      if (!values.ok()) {
        return fail(values.error());
      }
      selector.match_expressions.push_back(
          {key, op == "in" ? SelectorOperator::kIn : SelectorOperator::kNotIn, std::move(values).value()});
      return okStatus();
    }
    return error("expected =, ==, !=, in or notin after \"" + key + "\"");
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Result<LabelSelector> parseSelector(std::string_view text) {
  return SelectorParser(text).parse();
}

std::string formatSelector(const LabelSelector& selector) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : selector.match_labels) {
    parts.push_back(std::string(key).append("=").append(value));
  }
  for (const auto& req : selector.match_expressions) {
    switch (req.op) {
      case SelectorOperator::kExists:
        parts.push_back(req.key);
        break;
      case SelectorOperator::kDoesNotExist:
        parts.push_back("!" + req.key);
        break;
      case SelectorOperator::kIn:
      case SelectorOperator::kNotIn: {
        const bool in = req.op == SelectorOperator::kIn;
        // "key in ()" does not parse, so one empty value is written as an equality ("key!=" is NotIn [""]).
        if (req.values.size() == 1 && req.values.front().empty()) {
          parts.push_back(req.key + (in ? "=" : "!="));
          break;
        }
        std::string joined;
        for (size_t i = 0; i < req.values.size(); ++i) {
          joined += (i == 0 ? "" : ",") + req.values[i];  // by index: an empty first value keeps its comma
        }
        parts.push_back(req.key + (in ? " in (" : " notin (") + joined + ")");
        break;
      }
    }
  }
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : ",") + part;
  }
  return out;
}

}  // namespace flotilla::model
