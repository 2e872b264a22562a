#include "flotilla/core/yaml.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>
#include <sstream>

#include <simdjson.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "flotilla/core/util.h"

namespace flotilla {
namespace {

std::string location(std::string_view source, const YAML::Mark& mark) {
  std::string out(source);
  if (mark.line >= 0) {
    out += ":" + std::to_string(mark.line + 1);
  }
  return out;
}

bool allOf(std::string_view text, bool (*accept)(char)) {
  return !text.empty() && std::all_of(text.begin(), text.end(), accept);
}
bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
bool isOctDigit(char c) {
  return c >= '0' && c <= '7';
}
bool isHexDigit(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
std::string_view withoutSign(std::string_view text) {
  return !text.empty() && (text[0] == '-' || text[0] == '+') ? text.substr(1) : text;
}

// [-+]? digits
bool isCoreInt(std::string_view text) {
  return allOf(withoutSign(text), isDigit);
}

// [-+]? ( . digits | digits ( . digits? )? ) ( [eE] [-+]? digits )?
bool isCoreFloat(std::string_view text) {
  std::string_view rest = withoutSign(text);
  auto exponent = rest.find_first_of("eE");
  std::string_view mantissa = rest.substr(0, exponent);
  if (exponent != std::string_view::npos && !isCoreInt(rest.substr(exponent + 1))) {
    return false;
  }
  auto dot = mantissa.find('.');
  if (dot == std::string_view::npos) {
    return allOf(mantissa, isDigit);
  }
  std::string_view whole = mantissa.substr(0, dot);
  std::string_view fraction = mantissa.substr(dot + 1);
  if (whole.empty()) {
    return allOf(fraction, isDigit);
  }
  return allOf(whole, isDigit) && (fraction.empty() || allOf(fraction, isDigit));
}

// YAML 1.2 core schema resolution of a plain (unquoted) scalar.
Json resolvePlainScalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return Json();
  }
  if (text == "true" || text == "True" || text == "TRUE") {
    return Json(true);
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    return Json(false);
  }
  if (isCoreInt(text)) {
    int64_t value = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), value);
    if (ec == std::errc() && ptr == text.data() + text.size()) {
      return Json(value);
    }
    return Json(std::strtod(text.c_str(), nullptr));
  }
  if (startsWith(text, "0o") && allOf(std::string_view(text).substr(2), isOctDigit)) {
    return Json(static_cast<int64_t>(std::strtoll(text.c_str() + 2, nullptr, 8)));
  }
  if (startsWith(text, "0x") && allOf(std::string_view(text).substr(2), isHexDigit)) {
    return Json(static_cast<int64_t>(std::strtoll(text.c_str() + 2, nullptr, 16)));
  }
  if (isCoreFloat(text)) {
    return Json(std::strtod(text.c_str(), nullptr));
  }
  if (text == ".inf" || text == ".Inf" || text == ".INF" || text == "+.inf") {
    return Json(HUGE_VAL);
  }
  if (text == "-.inf" || text == "-.Inf" || text == "-.INF") {
    return Json(-HUGE_VAL);
  }
  return Json(text);
}

class Converter {
 public:
  //! `lines` (optional, in convert) receives path -> line for every key and sequence item converted.
  Converter(std::string_view source, const YamlLimits& limits, size_t input_bytes)
      : source_(source), limits_(limits), max_bytes_(std::max(limits.max_expanded_bytes, input_bytes)) {}

  Result<Json> convert(const YAML::Node& node, const std::string& path = {},
                       std::map<std::string, int, std::less<>>* lines = nullptr) {
    FLOTILLA_TRY(charge(node));
    ++depth_;
    auto converted = convertNode(node, path, lines);
    --depth_;
    return converted;
  }

 private:
  //! Scalars and keys become JSON strings, which must be UTF-8: yaml-cpp passes other bytes through, and a value
  //! holding them would be written into bus messages and records that no JSON reader accepts.
  Status checkUtf8(const std::string& text, const YAML::Mark& mark) const {
    if (simdjson::validate_utf8(text.data(), text.size())) {
      return {};
    }
    return fail(ErrorKind::kInvalid, "YAML text is not valid UTF-8", location(source_, mark));
  }

  //! Counts one node (and its scalar text) against the limits; the error names the file and line.
  Status charge(const YAML::Node& node) {
    if (node.Type() == YAML::NodeType::Scalar) {
      FLOTILLA_TRY(checkUtf8(node.Scalar(), node.Mark()));
    }
    bytes_ += 1 + (node.Type() == YAML::NodeType::Scalar ? node.Scalar().size() : 0);
    std::string exceeded;
    if (++nodes_ > limits_.max_nodes) {
      exceeded = "more than " + std::to_string(limits_.max_nodes) + " nodes";
    } else if (bytes_ > max_bytes_) {
      exceeded = "more than " + std::to_string(max_bytes_) + " bytes";
    } else if (depth_ >= limits_.max_depth) {
      return fail(ErrorKind::kInvalid,
                  "YAML nests deeper than " + std::to_string(limits_.max_depth) +
                      " levels (an anchor that contains its own alias?)",
                  location(source_, node.Mark()));
    } else {
      return {};
    }
    return fail(ErrorKind::kInvalid, "YAML document expands to " + exceeded + " (aliases repeat large parts)",
                location(source_, node.Mark()));
  }

  Result<Json> convertNode(const YAML::Node& node, const std::string& path,
                           std::map<std::string, int, std::less<>>* lines) {
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return Json();
      case YAML::NodeType::Scalar:
        // yaml-cpp tags quoted scalars "!" and plain ones "?"; an explicit !!str also stays a string.
        if (node.Tag() == "?") {
          return resolvePlainScalar(node.Scalar());
        }
        return Json(node.Scalar());
      case YAML::NodeType::Sequence: {
        Json::Array array;
        array.reserve(node.size());
        for (const auto& item : node) {
          std::string item_path;
          if (lines != nullptr) {
            item_path = yamlIndexPath(path, array.size());
            lines->emplace(item_path, item.Mark().line + 1);
          }
          auto converted = convert(item, item_path, lines);
          if (!converted.ok()) {
            return converted;
          }
          array.push_back(std::move(converted).value());
        }
        return Json(std::move(array));
      }
      case YAML::NodeType::Map: {
        Json::Object object;
        std::set<std::string, std::less<>> explicit_keys;  // merged ("<<") keys may be overridden, these not
        for (const auto& entry : node) {
          if (!entry.first.IsScalar()) {
            return fail(ErrorKind::kInvalid, "mapping keys must be scalars", location(source_, entry.first.Mark()));
          }
          const std::string& key = entry.first.Scalar();
          FLOTILLA_TRY(checkUtf8(key, entry.first.Mark()));
          bytes_ += key.size();
          if (key == "<<") {
            // Merge keys: copy the merged map's entries that are not set explicitly. Their lines point at the
            // anchor and never replace the line of a key written here, before or after the merge key.
            std::map<std::string, int, std::less<>> merged_lines;
            auto merged = convert(entry.second, path, lines != nullptr ? &merged_lines : nullptr);
            if (!merged.ok()) {
              return merged;
            }
            if (lines != nullptr) {
              lines->merge(merged_lines);  // keeps entries already recorded for keys written here
            }
            if (merged->isObject()) {
              for (auto& [k, v] : merged->asObject()) {
                object.try_emplace(k, v);
              }
            }
            continue;
          }
          if (!explicit_keys.insert(key).second) {
            return fail(ErrorKind::kInvalid, "duplicate key \"" + key + "\"", location(source_, entry.first.Mark()));
          }
          std::string key_path;
          if (lines != nullptr) {
            key_path = yamlKeyPath(path, key);
            (*lines)[key_path] = entry.first.Mark().line + 1;  // an explicit key wins over a merged one
          }
          auto converted = convert(entry.second, key_path, lines);
          if (!converted.ok()) {
            return converted;
          }
          object.insert_or_assign(key, std::move(converted).value());
        }
        return Json(std::move(object));
      }
    }
    return Json();
  }

  std::string_view source_;
  const YamlLimits& limits_;
  size_t max_bytes_;
  size_t nodes_ = 0;
  size_t bytes_ = 0;
  size_t depth_ = 0;
};

//! Records where each document starts, building nothing.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  YAML::Mark start;
};

//! yaml-cpp 0.7 (Debian 12's) never gets past a document that starts with a flow entry (",", "--- ,"): LoadAll adds
//! null documents until memory runs out (yaml-cpp issue 1040, fixed in later releases). So the stream's events are
//! read once first, without building nodes, and a document that starts where the previous one did is refused.
//! Throws YAML::Exception for invalid YAML, as LoadAll would.
Status checkDocumentsAdvance(const std::string& text, std::string_view source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts handler;
  int previous = -1;
  while (parser.HandleNextDocument(handler)) {
    if (handler.start.pos == previous) {
      return fail(ErrorKind::kInvalid,
                  "invalid YAML: unexpected token at the start of a document (a ',' outside [ ] or { }?)",
                  location(source, handler.start));
    }
    previous = handler.start.pos;
  }
  return {};
}

Result<std::vector<YAML::Node>> loadAll(std::string_view text, std::string_view source, const YamlLimits& limits) {
  if (text.size() > limits.max_input_bytes) {
    return fail(ErrorKind::kInvalid,
                "YAML input is " + std::to_string(text.size()) + " bytes, over the limit of " +
                    std::to_string(limits.max_input_bytes),
                std::string(source));
  }
  try {
    std::string input(text);
    FLOTILLA_TRY(checkDocumentsAdvance(input, source));
    return YAML::LoadAll(input);
  } catch (const YAML::Exception& e) {
    return fail(ErrorKind::kInvalid, "invalid YAML: " + e.msg, location(source, e.mark));
  }
}

}  // namespace

Result<std::vector<YamlDocument>> parseYamlDocuments(std::string_view text, std::string_view source,
                                                     const YamlLimits& limits) {
  auto nodes = loadAll(text, source, limits);
  if (!nodes.ok()) {
    return fail(nodes.error());
  }
  std::vector<YamlDocument> documents;
  Converter converter(source, limits, text.size());
  for (const auto& node : *nodes) {
    if (node.IsNull() || !node.IsDefined()) {
      continue;  // an empty or comment-only document between --- markers
    }
    try {
      YamlDocument document;
      document.line = node.Mark().line + 1;
      auto converted = converter.convert(node, {}, limits.record_lines ? &document.lines : nullptr);
      if (!converted.ok()) {
        return fail(converted.error());
      }
      document.value = std::move(converted).value();
      documents.push_back(std::move(document));
    } catch (const YAML::Exception& e) {
      return fail(ErrorKind::kInvalid, "invalid YAML: " + e.msg, location(source, e.mark));
    }
  }
  return documents;
}

int YamlDocument::lineOf(std::string_view path) const {
  std::string current(path);
  while (!current.empty()) {
    if (auto it = lines.find(current); it != lines.end()) {
      return it->second;
    }
    current = yamlParentPath(current);
  }
  return line;
}

std::string yamlKeyPath(std::string_view parent, std::string_view key) {
  bool plain = !key.empty() && key.find_first_of(".[]\" \t\r\n") == std::string_view::npos;
  std::string out(parent);
  if (plain) {
    if (!out.empty()) {
      out.push_back('.');
    }
    out.append(key);
  } else {
    out += "[" + jsonQuote(key) + "]";
  }
  return out;
}

std::string yamlIndexPath(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string yamlParentPath(std::string_view path) {
  if (path.empty()) {
    return {};
  }
  if (path.back() == ']') {
    // "[0]" or "[\"quoted.key\"]": find the '[' that opens this segment, skipping a quoted key's content.
    size_t open = std::string_view::npos;
    if (path.size() >= 2 && path[path.size() - 2] == '"') {
      bool in_quote = false;
      for (size_t i = 0; i < path.size() - 1; ++i) {
        char c = path[i];
        if (in_quote) {
          if (c == '\\') {
            ++i;
          } else if (c == '"') {
            in_quote = false;
          }
        } else if (c == '"') {
          in_quote = true;
        } else if (c == '[') {
          open = i;
        }
      }
    } else {
      open = path.rfind('[');
    }
    return open == std::string_view::npos ? std::string() : std::string(path.substr(0, open));
  }
  size_t dot = path.find_last_of(".]");
  if (dot == std::string_view::npos) {
    return {};
  }
  return std::string(path.substr(0, path[dot] == '.' ? dot : dot + 1));
}

Result<Json> parseYaml(std::string_view text, std::string_view source, const YamlLimits& limits) {
  auto documents = parseYamlDocuments(text, source, limits);
  if (!documents.ok()) {
    return fail(documents.error());
  }
  if (documents->empty()) {
    return Json();
  }
  if (documents->size() > 1) {
    return fail(ErrorKind::kInvalid, "expected one YAML document, found " + std::to_string(documents->size()),
                std::string(source));
  }
  return std::move(documents->front().value);
}

namespace {

void emit(YAML::Emitter& out, const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      out << YAML::Null;
      break;
    case Json::Type::kBool:
      out << value.asBool();
      break;
    case Json::Type::kInt:
      out << value.asInt();
      break;
    case Json::Type::kDouble:
      out << value.asDouble();
      break;
    case Json::Type::kString: {
      const std::string& s = value.asString();
      // Quote strings that would otherwise read back as another type ("true", "1", "null", "").
      Json resolved = resolvePlainScalar(s);
      if (!resolved.isString() || s.empty()) {
        out << YAML::DoubleQuoted << s;
      } else if (s.find('\n') != std::string::npos) {
        // yaml-cpp writes literal blocks with clip chomping ("|"), which reads back with exactly one
        // trailing newline; any other string with newlines is double-quoted to round-trip exactly.
        bool clip_safe = s.back() == '\n' && (s.size() < 2 || s[s.size() - 2] != '\n') && s.front() != ' ';
        if (clip_safe) {
          out << YAML::Literal << s;
        } else {
          out << YAML::DoubleQuoted << s;
        }
      } else {
        out << s;
      }
      break;
    }
    case Json::Type::kArray:
      // Empty collections in flow style ("rules: []"); block style would put "[]" on a line of its own.
      if (value.asArray().empty()) {
        out << YAML::Flow;
      }
      out << YAML::BeginSeq;
      for (const auto& item : value.asArray()) {
        emit(out, item);
      }
      out << YAML::EndSeq;
      break;
    case Json::Type::kObject:
      if (value.asObject().empty()) {
        out << YAML::Flow;
      }
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.asObject()) {
        out << YAML::Key << key << YAML::Value;
        emit(out, item);
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

std::string toYaml(const Json& value) {
  YAML::Emitter out;
  emit(out, value);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') {
    text.push_back('\n');
  }
  return text;
}

}  // namespace flotilla
