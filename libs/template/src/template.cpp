#include "flotilla/template/template.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"

namespace flotilla::templating {
namespace {

constexpr std::string_view kOpen = "${";
constexpr char kClose = '}';
constexpr int kMaxDepth = 64;  // nesting of if/parentheses: keeps a hostile template from exhausting the stack

Error syntaxError(size_t column, const std::string& message) {
  return Error{ErrorKind::kInvalid, "column " + std::to_string(column + 1) + ": " + message, {}};
}

// ---- tokens ----

struct Token {
  enum class Kind { kField, kDollar, kIdent, kString, kInt, kDouble, kPipe, kLParen, kRParen };
  Kind kind;
  std::string text;                 //!< identifier, string value
  std::vector<std::string> fields;  //!< kField/kDollar: the chain after the dot
  Json number;
  size_t column = 0;
};

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

//! Reads `.A.B` (or `.` alone) starting at text[i] == '.'.
std::vector<std::string> readFieldChain(std::string_view text, size_t& i) {
  std::vector<std::string> fields;
  while (i < text.size() && text[i] == '.') {
    size_t start = ++i;
    while (i < text.size() && isIdentChar(text[i])) {
      ++i;
    }
    if (i == start) {
      break;  // a lone "." (dot itself)
    }
    fields.emplace_back(text.substr(start, i - start));
  }
  return fields;
}

Result<std::string> readQuoted(std::string_view text, size_t& i, size_t base) {
  const size_t start = i;
  ++i;
  std::string out;
  while (i < text.size() && text[i] != '"') {
    char c = text[i];
    if (c == '\n') {
      break;
    }
    if (c == '\\' && i + 1 < text.size()) {
      char e = text[++i];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '"':
          out += '"';
          break;
        case '\'':
          out += '\'';
          break;
        default:
          return fail(syntaxError(base + i, std::string("unknown escape \\") + e + " in a string"));
      }
      ++i;
      continue;
    }
    out += c;
    ++i;
  }
  if (i >= text.size() || text[i] != '"') {
    return fail(syntaxError(base + start, "unterminated string"));
  }
  ++i;
  return out;
}

//! Tokenises the inside of one action (between the delimiters). `base` is its column in the whole text.
Result<std::vector<Token>> tokenize(std::string_view text, size_t base) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    const size_t column = base + i;
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      ++i;
    } else if (c == '|') {
      tokens.push_back({Token::Kind::kPipe, "|", {}, {}, column});
      ++i;
    } else if (c == '(') {
      tokens.push_back({Token::Kind::kLParen, "(", {}, {}, column});
      ++i;
    } else if (c == ')') {
      tokens.push_back({Token::Kind::kRParen, ")", {}, {}, column});
      ++i;
    } else if (c == '.') {
      tokens.push_back({Token::Kind::kField, ".", readFieldChain(text, i), {}, column});
    } else if (c == '$') {
      ++i;
      if (i < text.size() && isIdentChar(text[i])) {
        return fail(syntaxError(column, "variables are not supported (only $)"));
      }
      tokens.push_back({Token::Kind::kDollar, "$", readFieldChain(text, i), {}, column});
    } else if (c == '"') {
      auto value = readQuoted(text, i, base);
      if (!value.ok()) {
        return fail(value.error());
      }
      tokens.push_back({Token::Kind::kString, std::move(value).value(), {}, {}, column});
    } else if (c == '`') {
      size_t end = text.find('`', i + 1);
      if (end == std::string_view::npos) {
        return fail(syntaxError(column, "unterminated raw string"));
      }
      tokens.push_back({Token::Kind::kString, std::string(text.substr(i + 1, end - i - 1)), {}, {}, column});
      i = end + 1;
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0 ||
               ((c == '-' || c == '+') && i + 1 < text.size() &&
                std::isdigit(static_cast<unsigned char>(text[i + 1])) != 0)) {
      size_t start = i++;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) != 0 || text[i] == '.' ||
                                 ((text[i] == '-' || text[i] == '+') && (text[i - 1] == 'e' || text[i - 1] == 'E')))) {
        ++i;
      }
      std::string literal(text.substr(start, i - start));
      const char* first = literal.data() + (literal[0] == '+' ? 1 : 0);
      const char* last = literal.data() + literal.size();
      int64_t as_int = 0;
      if (auto [p, ec] = std::from_chars(first, last, as_int); ec == std::errc() && p == last) {
        tokens.push_back({Token::Kind::kInt, literal, {}, Json(as_int), column});
        continue;
      }
      double as_double = 0;
      if (auto [p, ec] = std::from_chars(first, last, as_double); ec == std::errc() && p == last) {
        tokens.push_back({Token::Kind::kDouble, literal, {}, Json(as_double), column});
        continue;
      }
      return fail(syntaxError(column, "bad number syntax: " + literal));
    } else if (isIdentChar(c)) {
      size_t start = i;
      while (i < text.size() && isIdentChar(text[i])) {
        ++i;
      }
      tokens.push_back({Token::Kind::kIdent, std::string(text.substr(start, i - start)), {}, {}, column});
      if (i < text.size() && text[i] == '.') {
        return fail(syntaxError(base + i, "fields of a function result are not supported; use a pipeline"));
      }
    } else if (c == ':' || c == '=') {
      return fail(syntaxError(column, "variable declarations are not supported"));
    } else {
      return fail(syntaxError(column, std::string("unexpected character '") + c + "' in an action"));
    }
  }
  return tokens;
}

// ---- syntax tree ----

struct Pipeline;

struct Operand {
  enum class Kind { kField, kDollar, kLiteral, kFunction, kPipeline };
  Kind kind = Kind::kLiteral;
  std::vector<std::string> fields;  //!< kField/kDollar
  Json literal;                     //!< kLiteral
  std::string name;                 //!< kFunction
  std::shared_ptr<Pipeline> sub;    //!< kPipeline
  size_t column = 0;
};

struct Command {
  std::vector<Operand> operands;
  size_t column = 0;
};

struct Pipeline {
  std::vector<Command> commands;
  size_t column = 0;
};

struct Node;
using NodeList = std::vector<Node>;

struct Node {
  enum class Kind { kText, kAction, kIf };
  Kind kind = Kind::kText;
  std::string text;
  Pipeline pipeline;                                 //!< kAction
  std::vector<std::pair<Pipeline, NodeList>> cases;  //!< kIf: condition and body, in order (if, else if...)
  NodeList otherwise;                                //!< kIf: else
};

const std::map<std::string, int, std::less<>>& functionArity();  // forward: name -> minimum argument count

class PipelineParser {
 public:
  PipelineParser(const std::vector<Token>& tokens, size_t begin, size_t end)
      : tokens_(tokens), pos_(begin), end_(end) {}

  Result<Pipeline> parse(int depth) {
    if (depth > kMaxDepth) {
      return fail(syntaxError(column(), "too deeply nested"));
    }
    Pipeline pipeline;
    pipeline.column = column();
    while (true) {
      Command command;
      command.column = column();
      while (pos_ < end_ && tokens_[pos_].kind != Token::Kind::kPipe && tokens_[pos_].kind != Token::Kind::kRParen) {
        auto operand = parseOperand(depth);
        if (!operand.ok()) {
          return fail(operand.error());
        }
        command.operands.push_back(std::move(operand).value());
      }
      if (command.operands.empty()) {
        return fail(syntaxError(command.column, "missing value in a pipeline"));
      }
      if (command.operands.size() > 1 && command.operands[0].kind != Operand::Kind::kFunction) {
        return fail(syntaxError(command.operands[1].column, "cannot give an argument to a non-function"));
      }
      pipeline.commands.push_back(std::move(command));
      if (pos_ < end_ && tokens_[pos_].kind == Token::Kind::kPipe) {
        ++pos_;
        if (pos_ >= end_ || tokens_[pos_].kind == Token::Kind::kRParen) {
          return fail(syntaxError(column(), "missing command after '|'"));
        }
        continue;
      }
      break;
    }
    for (size_t i = 1; i < pipeline.commands.size(); ++i) {
      if (pipeline.commands[i].operands[0].kind != Operand::Kind::kFunction) {
        return fail(syntaxError(pipeline.commands[i].column, "a pipeline stage after '|' must be a function"));
      }
    }
    return pipeline;
  }

  [[nodiscard]] size_t position() const { return pos_; }
  [[nodiscard]] size_t column() const {
    if (pos_ < end_) {
      return tokens_[pos_].column;
    }
    return end_ > 0 && end_ <= tokens_.size() ? tokens_[end_ - 1].column + 1 : 0;
  }

 private:
  Result<Operand> parseOperand(int depth) {
    const Token& token = tokens_[pos_++];
    Operand operand;
    operand.column = token.column;
    switch (token.kind) {
      case Token::Kind::kField:
        operand.kind = Operand::Kind::kField;
        operand.fields = token.fields;
        return operand;
      case Token::Kind::kDollar:
        operand.kind = Operand::Kind::kDollar;
        operand.fields = token.fields;
        return operand;
      case Token::Kind::kString:
        operand.literal = Json(token.text);
        return operand;
      case Token::Kind::kInt:
      case Token::Kind::kDouble:
        operand.literal = token.number;
        return operand;
      case Token::Kind::kIdent:
        if (token.text == "true" || token.text == "false") {
          operand.literal = Json(token.text == "true");
          return operand;
        }
        if (token.text == "nil") {
          operand.literal = Json();
          return operand;
        }
        if (functionArity().count(token.text) == 0) {
          return fail(syntaxError(token.column, "unsupported function \"" + token.text + "\""));
        }
        operand.kind = Operand::Kind::kFunction;
        operand.name = token.text;
        return operand;
      case Token::Kind::kLParen: {
        auto sub = parse(depth + 1);
        if (!sub.ok()) {
          return fail(sub.error());
        }
        if (pos_ >= end_ || tokens_[pos_].kind != Token::Kind::kRParen) {
          return fail(syntaxError(token.column, "unclosed '('"));
        }
        ++pos_;
        operand.kind = Operand::Kind::kPipeline;
        operand.sub = std::make_shared<Pipeline>(std::move(sub).value());
        return operand;
      }
      default:
        return fail(syntaxError(token.column, "unexpected '" + token.text + "'"));
    }
  }

  const std::vector<Token>& tokens_;
  size_t pos_;
  size_t end_;
};

//! One action as the template parser sees it.
struct Action {
  std::vector<Token> tokens;
  size_t column = 0;
  bool comment = false;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::string_view text) : text_(text) {}

  Result<NodeList> parse() {
    std::string closing;
    auto list = parseList(0, closing);
    if (!list.ok()) {
      return fail(list.error());
    }
    if (!closing.empty()) {
      return fail(syntaxError(closing_column_, "unexpected {{" + closing + "}}"));
    }
    return list;
  }

 private:
  //! Reads nodes until the end of the text or an `else`/`end` action (returned in `closing`, with the tokens of
  //! an `else if` condition in else_tokens_).
  Result<NodeList> parseList(int depth, std::string& closing) {
    if (depth > kMaxDepth) {
      return fail(syntaxError(pos_, "too deeply nested"));
    }
    NodeList nodes;
    closing.clear();
    while (pos_ < text_.size()) {
      size_t open = text_.find(kOpen, pos_);
      std::string literal(text_.substr(pos_, open == std::string_view::npos ? std::string_view::npos : open - pos_));
      if (open == std::string_view::npos) {
        pos_ = text_.size();
        appendText(nodes, std::move(literal));
        break;
      }
      size_t inner = open + kOpen.size();
      if (inner + 1 < text_.size() && text_[inner] == '-' &&
          std::isspace(static_cast<unsigned char>(text_[inner + 1])) != 0) {
        while (!literal.empty() && std::isspace(static_cast<unsigned char>(literal.back())) != 0) {
          literal.pop_back();
        }
        inner += 1;
      }
      appendText(nodes, std::move(literal));
      auto action = readAction(open, inner);
      if (!action.ok()) {
        return fail(action.error());
      }
      if (action->comment) {
        continue;
      }
      const auto& tokens = action->tokens;
      if (tokens.empty()) {
        return fail(syntaxError(action->column, "empty action"));
      }
      const Token& head = tokens[0];
      if (head.kind == Token::Kind::kIdent) {
        if (head.text == "end") {
          if (tokens.size() > 1) {
            return fail(syntaxError(tokens[1].column, "unexpected text after end"));
          }
          closing = "end";
          closing_column_ = head.column;
          return nodes;
        }
        if (head.text == "else") {
          closing = "else";
          closing_column_ = head.column;
          else_tokens_.assign(tokens.begin() + 1, tokens.end());
          return nodes;
        }
        if (head.text == "if") {
          auto node = parseIf(tokens, 1, head.column, depth);
          if (!node.ok()) {
            return fail(node.error());
          }
          nodes.push_back(std::move(node).value());
          continue;
        }
        if (head.text == "range" || head.text == "with" || head.text == "define" || head.text == "template" ||
            head.text == "block" || head.text == "break" || head.text == "continue") {
          return fail(syntaxError(head.column, "unsupported action \"" + head.text + "\""));
        }
      }
      PipelineParser parser(tokens, 0, tokens.size());
      auto pipeline = parser.parse(0);
      if (!pipeline.ok()) {
        return fail(pipeline.error());
      }
      if (parser.position() != tokens.size()) {
        return fail(syntaxError(tokens[parser.position()].column, "unexpected ')'"));
      }
      Node node;
      node.kind = Node::Kind::kAction;
      node.pipeline = std::move(pipeline).value();
      nodes.push_back(std::move(node));
    }
    return nodes;
  }

  Result<Node> parseIf(const std::vector<Token>& tokens, size_t first, size_t column, int depth) {
    Node node;
    node.kind = Node::Kind::kIf;
    std::vector<Token> condition(tokens.begin() + static_cast<std::ptrdiff_t>(first), tokens.end());
    while (true) {
      if (condition.empty()) {
        return fail(syntaxError(column, "missing condition in if"));
      }
      PipelineParser parser(condition, 0, condition.size());
      auto pipeline = parser.parse(depth + 1);
      if (!pipeline.ok()) {
        return fail(pipeline.error());
      }
      if (parser.position() != condition.size()) {
        return fail(syntaxError(condition[parser.position()].column, "unexpected ')'"));
      }
      std::string closing;
      auto body = parseList(depth + 1, closing);
      if (!body.ok()) {
        return fail(body.error());
      }
      node.cases.emplace_back(std::move(pipeline).value(), std::move(body).value());
      if (closing.empty()) {
        return fail(syntaxError(column, "unexpected end of template: if without end"));
      }
      if (closing == "end") {
        return node;
      }
      // else / else if
      std::vector<Token> rest = std::move(else_tokens_);
      if (!rest.empty() && rest[0].kind == Token::Kind::kIdent && rest[0].text == "if") {
        column = rest[0].column;
        condition.assign(rest.begin() + 1, rest.end());
        continue;
      }
      if (!rest.empty()) {
        return fail(syntaxError(rest[0].column, "unexpected text after else"));
      }
      auto otherwise = parseList(depth + 1, closing);
      if (!otherwise.ok()) {
        return fail(otherwise.error());
      }
      if (closing != "end") {
        return fail(
            syntaxError(column, closing.empty() ? "unexpected end of template: if without end" : "else after else"));
      }
      node.otherwise = std::move(otherwise).value();
      return node;
    }
  }

  static void appendText(NodeList& nodes, std::string text) {
    if (text.empty()) {
      return;
    }
    Node node;
    node.text = std::move(text);
    nodes.push_back(std::move(node));
  }

  //! Reads the action that starts at `open` (the "${"); its contents start at `inner`.
  Result<Action> readAction(size_t open, size_t inner) {
    Action action;
    action.column = open;
    // Comments: ${/* ... */}
    size_t probe = inner;
    while (probe < text_.size() && text_[probe] == ' ') {
      ++probe;
    }
    if (text_.substr(probe, 2) == "/*") {
      size_t end = text_.find("*/", probe + 2);
      if (end == std::string_view::npos) {
        return fail(syntaxError(open, "unclosed comment"));
      }
      size_t close = end + 2;
      while (close < text_.size() && text_[close] == ' ') {
        ++close;
      }
      bool trim = false;
      if (close < text_.size() && text_[close] == '-') {
        trim = true;
        ++close;
      }
      if (close >= text_.size() || text_[close] != kClose) {
        return fail(syntaxError(open, "comment ends before the closing }"));
      }
      pos_ = close + 1;
      if (trim) {
        skipSpace();
      }
      action.comment = true;
      return action;
    }
    // Find the closing delimiter outside string literals.
    size_t i = inner;
    while (i < text_.size() && text_[i] != kClose) {
      char c = text_[i];
      if (c == '"') {
        ++i;
        while (i < text_.size() && text_[i] != '"' && text_[i] != '\n') {
          i += text_[i] == '\\' ? 2 : 1;
        }
        if (i >= text_.size() || text_[i] != '"') {
          return fail(syntaxError(open, "unterminated string in an action"));
        }
      } else if (c == '`') {
        size_t end = text_.find('`', i + 1);
        if (end == std::string_view::npos) {
          return fail(syntaxError(open, "unterminated raw string in an action"));
        }
        i = end;
      }
      ++i;
    }
    if (i >= text_.size()) {
      return fail(syntaxError(open, "unclosed action: missing }"));
    }
    size_t content_end = i;
    bool trim_after = false;
    if (content_end > inner && text_[content_end - 1] == '-' &&
        (content_end - 1 == inner || std::isspace(static_cast<unsigned char>(text_[content_end - 2])) != 0)) {
      trim_after = true;
      --content_end;
    }
    auto tokens = tokenize(text_.substr(inner, content_end - inner), inner);
    if (!tokens.ok()) {
      return fail(tokens.error());
    }
    action.tokens = std::move(tokens).value();
    pos_ = i + 1;
    if (trim_after) {
      skipSpace();
    }
    return action;
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) {
      ++pos_;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t closing_column_ = 0;
  std::vector<Token> else_tokens_;
};

// ---- values ----

bool truthy(const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      return false;
    case Json::Type::kBool:
      return value.asBool();
    case Json::Type::kInt:
      return value.asInt() != 0;
    case Json::Type::kDouble:
      return value.asDouble() != 0;
    case Json::Type::kString:
      return !value.asString().empty();
    case Json::Type::kArray:
      return !value.asArray().empty();
    case Json::Type::kObject:
      return !value.asObject().empty();
  }
  return false;
}

//! Go's %v for a float64: the shortest representation that reads back exactly (%g style, "3e+06").
std::string formatDouble(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) {
      break;
    }
  }
  return buffer;
}

//! Go's default formatting (%v) of a value.
std::string print(const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      return "<no value>";
    case Json::Type::kBool:
      return value.asBool() ? "true" : "false";
    case Json::Type::kInt:
      return std::to_string(value.asInt());
    case Json::Type::kDouble:
      return formatDouble(value.asDouble());
    case Json::Type::kString:
      return value.asString();
    case Json::Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < value.asArray().size(); ++i) {
        out += (i > 0 ? " " : "") + print(value.asArray()[i]);
      }
      return out + "]";
    }
    case Json::Type::kObject: {
      std::string out = "map[";
      bool first = true;
      for (const auto& [k, v] : value.asObject()) {
        out += (first ? "" : " ") + k + ":" + print(v);
        first = false;
      }
      return out + "]";
    }
  }
  return {};
}

// ---- functions ----

using Args = std::vector<Json>;

Error argError(const std::string& function, const std::string& message) {
  return Error{ErrorKind::kInvalid, "error calling " + function + ": " + message, {}};
}

Result<std::string> needString(const std::string& function, const Json& value, const char* what) {
  if (value.isString()) {
    return value.asString();
  }
  if (value.isNumber() || value.isBool()) {
    return print(value);  // sprig converts with toString
  }
  return fail(argError(function, std::string(what) + " must be a string, got " + jsonTypeName(value)));
}

std::string upper(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return text;
}

std::string lower(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return text;
}

std::string trimSpace(std::string_view text) {
  size_t b = 0;
  size_t e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b])) != 0) {
    ++b;
  }
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1])) != 0) {
    --e;
  }
  return std::string(text.substr(b, e - b));
}

std::string goQuote(std::string_view text) {
  // Go's strconv.Quote for printable text equals a JSON string literal except for <, >, & which Go keeps.
  return jsonQuote(text);
}

//! Comparison for eq/ne/lt/...: numbers compare by value, strings and bools by equality/order. Mixed kinds are an
//! error (Go: "incompatible types for comparison").
Result<int> compare(const std::string& function, const Json& a, const Json& b, bool ordering) {
  if (a.isNumber() && b.isNumber()) {
    double x = a.asDouble();
    double y = b.asDouble();
    if (a.isInt() && b.isInt()) {
      return a.asInt() < b.asInt() ? -1 : (a.asInt() > b.asInt() ? 1 : 0);
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.isString() && b.isString()) {
    return a.asString().compare(b.asString()) < 0 ? -1 : (a.asString() == b.asString() ? 0 : 1);
  }
  if (!ordering && a.isBool() && b.isBool()) {
    return a.asBool() == b.asBool() ? 0 : 1;
  }
  if (!ordering && (a.isNull() || b.isNull())) {
    return a.isNull() && b.isNull() ? 0 : 1;
  }
  return fail(argError(function, "incompatible types for comparison: " + jsonTypeName(a) + " and " + jsonTypeName(b)));
}

// The conversion specs passed to snprintf below are assembled only from the flag, width and precision characters
// accepted above plus a fixed conversion letter matched to the argument's type, so a non-literal format is safe.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
Result<std::string> sprintf(const Args& args) {
  if (args.empty()) {
    return fail(argError("printf", "missing format"));
  }
  auto format = needString("printf", args[0], "the format");
  if (!format.ok()) {
    return fail(format.error());
  }
  std::string out;
  size_t next = 1;
  const std::string& f = *format;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) {
      out += "%!(NOVERB)";
      break;
    }
    // Flags, width and precision: passed to snprintf for numbers.
    std::string spec = "%";
    while (i < f.size() && std::string_view("+-# 0").find(f[i]) != std::string_view::npos) {
      spec += f[i++];
    }
    while (i < f.size() && (std::isdigit(static_cast<unsigned char>(f[i])) != 0 || f[i] == '.')) {
      spec += f[i++];
    }
    if (i >= f.size()) {
      out += "%!(NOVERB)";
      break;
    }
    char verb = f[i];
    if (verb == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) {
      out += std::string("%!") + verb + "(MISSING)";
      continue;
    }
    const Json& arg = args[next++];
    char buffer[128];
    switch (verb) {
      case 'v':
      case 's':
        if (verb == 's' && !(arg.isString() || arg.isNumber() || arg.isBool())) {
          out += print(arg);
        } else {
          std::snprintf(buffer, sizeof(buffer), (spec + "s").c_str(), print(arg).c_str());
          out += spec.size() > 1 ? std::string(buffer) : print(arg);
        }
        break;
      case 'q':
        out += arg.isString() ? goQuote(arg.asString()) : print(arg);
        break;
      case 'd':
        if (!arg.isNumber()) {
          out += "%!d(" + jsonTypeName(arg) + "=" + print(arg) + ")";
          break;
        }
        std::snprintf(buffer, sizeof(buffer), (spec + "lld").c_str(), static_cast<long long>(arg.asInt()));
        out += buffer;
        break;
      case 'f':
      case 'e':
      case 'g':
        if (!arg.isNumber()) {
          out += std::string("%!") + verb + "(" + jsonTypeName(arg) + "=" + print(arg) + ")";
          break;
        }
        std::snprintf(buffer, sizeof(buffer), (spec + verb).c_str(), arg.asDouble());
        out += buffer;
        break;
      case 'x':
      case 'X':
        if (arg.isInt()) {
          std::snprintf(buffer, sizeof(buffer), (spec + "ll" + verb).c_str(), static_cast<long long>(arg.asInt()));
          out += buffer;
        } else {
          std::string text = print(arg);
          static const char* const kHex = "0123456789abcdef";
          for (unsigned char c : text) {
            char hi = kHex[c >> 4];
            char lo = kHex[c & 15];
            out += verb == 'X' ? static_cast<char>(std::toupper(hi)) : hi;
            out += verb == 'X' ? static_cast<char>(std::toupper(lo)) : lo;
          }
        }
        break;
      case 't':
        out += arg.isBool() ? print(arg) : "%!t(" + jsonTypeName(arg) + "=" + print(arg) + ")";
        break;
      default:
        return fail(argError(
            "printf", std::string("unsupported verb %") + verb + " (supported: %s %v %q %d %f %e %g %x %X %t %%)"));
    }
  }
  if (next < args.size()) {
    out += "%!(EXTRA)";
  }
  return out;
}
#pragma GCC diagnostic pop

using Function = std::function<Result<Json>(const Args&)>;

struct FunctionSpec {
  int min_args;
  int max_args;  //!< -1: any
  Function call;
};

Result<Json> stringFunction(const std::string& name, const Args& args, size_t index,
                            const std::function<Json(const std::string&)>& apply) {
  auto text = needString(name, args[index], "the argument");
  if (!text.ok()) {
    return fail(text.error());
  }
  return apply(*text);
}

const std::map<std::string, FunctionSpec, std::less<>>& functions() {
  static const std::map<std::string, FunctionSpec, std::less<>> table = [] {
    std::map<std::string, FunctionSpec, std::less<>> t;
    // Go builtins.
    t["and"] = {1, -1, nullptr};  // short-circuit: evaluated by the executor
    t["or"] = {1, -1, nullptr};
    t["not"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(!truthy(a[0])); }};
    t["len"] = {1, 1, [](const Args& a) -> Result<Json> {
                  if (a[0].isString()) {
                    return Json(static_cast<int64_t>(a[0].asString().size()));
                  }
                  if (a[0].isArray() || a[0].isObject()) {
                    return Json(static_cast<int64_t>(a[0].size()));
                  }
                  return fail(argError("len", "len of " + jsonTypeName(a[0])));
                }};
    t["index"] = {1, -1, [](const Args& a) -> Result<Json> {
                    Json current = a[0];
                    for (size_t i = 1; i < a.size(); ++i) {
                      if (current.isObject()) {
                        if (!a[i].isString()) {
                          return fail(argError("index", "a map key must be a string"));
                        }
                        const Json* next = current.find(a[i].asString());
                        current = next != nullptr ? *next : Json();  // Go: the zero value for a missing key
                      } else if (current.isArray()) {
                        if (!a[i].isInt()) {
                          return fail(argError("index", "a list index must be an integer"));
                        }
                        int64_t k = a[i].asInt();
                        if (k < 0 || static_cast<size_t>(k) >= current.asArray().size()) {
                          return fail(argError("index", "index out of range: " + std::to_string(k)));
                        }
                        current = Json(current.asArray()[static_cast<size_t>(k)]);
                      } else if (current.isNull()) {
                        return Json();
                      } else {
                        return fail(argError("index", "cannot index " + jsonTypeName(current)));
                      }
                    }
                    return current;
                  }};
    t["print"] = {0, -1, [](const Args& a) -> Result<Json> {
                    std::string out;
                    for (size_t i = 0; i < a.size(); ++i) {
                      // Go's fmt.Sprint adds spaces between operands when neither is a string.
                      if (i > 0 && !a[i].isString() && !a[i - 1].isString()) {
                        out += ' ';
                      }
                      out += print(a[i]);
                    }
                    return Json(out);
                  }};
    t["printf"] = {1, -1, [](const Args& a) -> Result<Json> {
                     auto text = sprintf(a);
                     if (!text.ok()) {
                       return fail(text.error());
                     }
                     return Json(*text);
                   }};
    for (const char* name : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      const std::string fn = name;
      t[fn] = {2, fn == "eq" ? -1 : 2, [fn](const Args& a) -> Result<Json> {
                 if (fn == "eq") {
                   for (size_t i = 1; i < a.size(); ++i) {
                     auto c = compare(fn, a[0], a[i], false);
                     if (!c.ok()) {
                       return fail(c.error());
                     }
                     if (*c == 0) {
                       return Json(true);
                     }
                   }
                   return Json(false);
                 }
                 auto c = compare(fn, a[0], a[1], fn != "ne");
                 if (!c.ok()) {
                   return fail(c.error());
                 }
                 const int order = *c;
                 const bool result = fn == "ne"   ? order != 0
                                     : fn == "lt" ? order < 0
                                     : fn == "le" ? order <= 0
                                     : fn == "gt" ? order > 0
                                                  : order >= 0;
                 return Json(result);
               }};
    }
    // sprig.
    t["default"] = {2, 2, [](const Args& a) -> Result<Json> { return truthy(a[1]) ? a[1] : a[0]; }};
    t["empty"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(!truthy(a[0])); }};
    t["coalesce"] = {1, -1, [](const Args& a) -> Result<Json> {
                       for (const auto& v : a) {
                         if (truthy(v)) {
                           return v;
                         }
                       }
                       return Json();
                     }};
    t["ternary"] = {3, 3, [](const Args& a) -> Result<Json> { return truthy(a[2]) ? a[0] : a[1]; }};
    t["hasKey"] = {2, 2, [](const Args& a) -> Result<Json> {
                     if (!a[0].isObject() && !a[0].isNull()) {
                       return fail(argError("hasKey", "the first argument must be a map, got " + jsonTypeName(a[0])));
                     }
                     auto key = needString("hasKey", a[1], "the key");
                     if (!key.ok()) {
                       return fail(key.error());
                     }
                     return Json(a[0].isObject() && a[0].contains(*key));
                   }};
    t["quote"] = {0, -1, [](const Args& a) -> Result<Json> {
                    std::string out;
                    for (size_t i = 0; i < a.size(); ++i) {
                      if (a[i].isNull()) {
                        continue;  // sprig skips nil
                      }
                      out += (out.empty() ? "" : " ") + goQuote(print(a[i]));
                    }
                    return Json(out);
                  }};
    t["squote"] = {0, -1, [](const Args& a) -> Result<Json> {
                     std::string out;
                     for (const auto& v : a) {
                       if (!v.isNull()) {
                         out += (out.empty() ? "'" : " '") + print(v) + "'";
                       }
                     }
                     return Json(out);
                   }};
    t["upper"] = {1, 1,
                  [](const Args& a) { return stringFunction("upper", a, 0, [](auto s) { return Json(upper(s)); }); }};
    t["lower"] = {1, 1,
                  [](const Args& a) { return stringFunction("lower", a, 0, [](auto s) { return Json(lower(s)); }); }};
    t["trim"] = {1, 1,
                 [](const Args& a) { return stringFunction("trim", a, 0, [](auto s) { return Json(trimSpace(s)); }); }};
    t["toString"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(print(a[0])); }};
    t["trimPrefix"] = {2, 2, [](const Args& a) -> Result<Json> {
                         auto prefix = needString("trimPrefix", a[0], "the prefix");
                         auto text = needString("trimPrefix", a[1], "the string");
                         if (!prefix.ok() || !text.ok()) {
                           return fail(prefix.ok() ? text.error() : prefix.error());
                         }
                         return Json(startsWith(*text, *prefix) ? text->substr(prefix->size()) : *text);
                       }};
    t["trimSuffix"] = {2, 2, [](const Args& a) -> Result<Json> {
                         auto suffix = needString("trimSuffix", a[0], "the suffix");
                         auto text = needString("trimSuffix", a[1], "the string");
                         if (!suffix.ok() || !text.ok()) {
                           return fail(suffix.ok() ? text.error() : suffix.error());
                         }
                         bool has = text->size() >= suffix->size() &&
                                    text->compare(text->size() - suffix->size(), suffix->size(), *suffix) == 0;
                         return Json(has ? text->substr(0, text->size() - suffix->size()) : *text);
                       }};
    t["replace"] = {3, 3, [](const Args& a) -> Result<Json> {
                      auto from = needString("replace", a[0], "the old string");
                      auto to = needString("replace", a[1], "the new string");
                      auto text = needString("replace", a[2], "the string");
                      if (!from.ok() || !to.ok() || !text.ok()) {
                        return fail(!from.ok() ? from.error() : (!to.ok() ? to.error() : text.error()));
                      }
                      if (from->empty()) {
                        return Json(*text);
                      }
                      std::string out;
                      size_t at = 0;
                      for (size_t hit; (hit = text->find(*from, at)) != std::string::npos; at = hit + from->size()) {
                        out += text->substr(at, hit - at) + *to;
                      }
                      return Json(out + text->substr(at));
                    }};
    t["contains"] = {2, 2, [](const Args& a) -> Result<Json> {
                       auto part = needString("contains", a[0], "the substring");
                       auto text = needString("contains", a[1], "the string");
                       if (!part.ok() || !text.ok()) {
                         return fail(part.ok() ? text.error() : part.error());
                       }
                       return Json(text->find(*part) != std::string::npos);
                     }};
    t["hasPrefix"] = {2, 2, [](const Args& a) -> Result<Json> {
                        auto prefix = needString("hasPrefix", a[0], "the prefix");
                        auto text = needString("hasPrefix", a[1], "the string");
                        if (!prefix.ok() || !text.ok()) {
                          return fail(prefix.ok() ? text.error() : prefix.error());
                        }
                        return Json(startsWith(*text, *prefix));
                      }};
    t["hasSuffix"] = {2, 2, [](const Args& a) -> Result<Json> {
                        auto suffix = needString("hasSuffix", a[0], "the suffix");
                        auto text = needString("hasSuffix", a[1], "the string");
                        if (!suffix.ok() || !text.ok()) {
                          return fail(suffix.ok() ? text.error() : suffix.error());
                        }
                        return Json(text->size() >= suffix->size() &&
                                    text->compare(text->size() - suffix->size(), suffix->size(), *suffix) == 0);
                      }};
    t["toJson"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(a[0].dump()); }};
    t["toYaml"] = {1, 1, [](const Args& a) -> Result<Json> {
                     std::string text = toYaml(a[0]);
                     while (!text.empty() && text.back() == '\n') {
                       text.pop_back();  // Helm's toYaml trims the trailing newline
                     }
                     return Json(text);
                   }};
    t["b64enc"] = {1, 1, [](const Args& a) {
                     return stringFunction("b64enc", a, 0, [](auto s) { return Json(base64Encode(s)); });
                   }};
    t["b64dec"] = {1, 1, [](const Args& a) -> Result<Json> {
                     auto text = needString("b64dec", a[0], "the argument");
                     if (!text.ok()) {
                       return fail(text.error());
                     }
                     auto decoded = base64Decode(*text);
                     if (!decoded.ok()) {
                       return fail(argError("b64dec", "not base64: " + decoded.error().message));
                     }
                     return Json(*decoded);
                   }};
    return t;
  }();
  return table;
}

const std::map<std::string, int, std::less<>>& functionArity() {
  static const std::map<std::string, int, std::less<>> arity = [] {
    std::map<std::string, int, std::less<>> out;
    for (const auto& [name, spec] : functions()) {
      out[name] = spec.min_args;
    }
    return out;
  }();
  return arity;
}

// ---- execution ----

class Executor {
 public:
  explicit Executor(const Json& context) : root_(context) {}

  Status run(const NodeList& nodes, std::string& out) {
    for (const auto& node : nodes) {
      switch (node.kind) {
        case Node::Kind::kText:
          out += node.text;
          break;
        case Node::Kind::kAction: {
          auto value = pipeline(node.pipeline);
          if (!value.ok()) {
            return fail(value.error());
          }
          out += print(*value);
          break;
        }
        case Node::Kind::kIf: {
          bool done = false;
          for (const auto& [condition, body] : node.cases) {
            auto value = pipeline(condition);
            if (!value.ok()) {
              return fail(value.error());
            }
            if (truthy(*value)) {
              FLOTILLA_TRY(run(body, out));
              done = true;
              break;
            }
          }
          if (!done) {
            FLOTILLA_TRY(run(node.otherwise, out));
          }
          break;
        }
      }
    }
    return {};
  }

  Result<Json> pipeline(const Pipeline& pipeline) {
    std::optional<Json> piped;
    for (const auto& command : pipeline.commands) {
      auto value = execute(command, piped);
      if (!value.ok()) {
        return fail(value.error());
      }
      piped = std::move(value).value();
    }
    return piped.value_or(Json());
  }

 private:
  Result<Json> field(const Json& start, const std::vector<std::string>& fields, size_t column) {
    const Json* current = &start;
    std::string path;
    for (const auto& name : fields) {
      path += '.';
      path += name;
      if (current->isObject()) {
        const Json* next = current->find(name);
        if (next == nullptr) {
          std::string message = "map has no entry for key \"";
          message.append(name).append("\" (at ").append(path).append(")");
          return fail(syntaxError(column, message));
        }
        current = next;
      } else if (current->isNull()) {
        return fail(syntaxError(column, "nil pointer evaluating " + path));
      } else {
        return fail(syntaxError(column, "can't evaluate field " + name + " in " + jsonTypeName(*current)));
      }
    }
    return *current;
  }

  Result<Json> operand(const Operand& op) {
    switch (op.kind) {
      case Operand::Kind::kField:
      case Operand::Kind::kDollar:  // without range/with, "." is always the root, like "$"
        return field(root_, op.fields, op.column);
      case Operand::Kind::kLiteral:
        return op.literal;
      case Operand::Kind::kPipeline:
        return pipeline(*op.sub);
      case Operand::Kind::kFunction:
        return call(op, {}, std::nullopt);
    }
    return Json();
  }

  Result<Json> execute(const Command& command, const std::optional<Json>& piped) {
    const Operand& head = command.operands[0];
    if (head.kind == Operand::Kind::kFunction) {
      std::vector<const Operand*> rest;
      for (size_t i = 1; i < command.operands.size(); ++i) {
        rest.push_back(&command.operands[i]);
      }
      return call(head, rest, piped);
    }
    return operand(head);
  }

  Result<Json> call(const Operand& head, const std::vector<const Operand*>& operands,
                    const std::optional<Json>& piped) {
    const auto& spec = functions().at(head.name);
    const size_t count = operands.size() + (piped ? 1 : 0);
    auto located = [&](const Error& error) {
      return Error{error.kind, "column " + std::to_string(head.column + 1) + ": " + error.message, error.where};
    };
    if (static_cast<int>(count) < spec.min_args || (spec.max_args >= 0 && static_cast<int>(count) > spec.max_args)) {
      return fail(located(argError(head.name, "wrong number of arguments: got " + std::to_string(count) + ", want " +
                                                  std::to_string(spec.min_args) +
                                                  (spec.max_args == spec.min_args ? std::string()
                                                   : spec.max_args < 0            ? " or more"
                                                                       : "-" + std::to_string(spec.max_args)))));
    }
    if (head.name == "and" || head.name == "or") {
      const bool is_and = head.name == "and";
      Json last;
      for (size_t i = 0; i < count; ++i) {
        if (i < operands.size()) {
          auto value = operand(*operands[i]);
          if (!value.ok()) {
            return fail(value.error());
          }
          last = std::move(value).value();
        } else {
          last = *piped;
        }
        if (truthy(last) != is_and) {
          return last;
        }
      }
      return last;
    }
    Args args;
    for (const Operand* op : operands) {
      auto value = operand(*op);
      if (!value.ok()) {
        return fail(value.error());
      }
      args.push_back(std::move(value).value());
    }
    if (piped) {
      args.push_back(*piped);
    }
    auto result = spec.call(args);
    if (!result.ok()) {
      return fail(located(result.error()));
    }
    return result;
  }

  const Json& root_;
};

Result<NodeList> parseTemplate(std::string_view text) {
  return TemplateParser(text).parse();
}

}  // namespace

bool hasTemplate(std::string_view text) {
  return text.find(kOpen) != std::string_view::npos;
}

Result<std::string> render(std::string_view text, const Json& context) {
  auto nodes = parseTemplate(text);
  if (!nodes.ok()) {
    return fail(nodes.error());
  }
  std::string out;
  Executor executor(context);
  FLOTILLA_TRY(executor.run(*nodes, out));
  return out;
}

Result<Json> evaluateValue(std::string_view text, const Json& context) {
  auto nodes = parseTemplate(text);
  if (!nodes.ok()) {
    return fail(nodes.error());
  }
  // Exactly one action, with only whitespace around it?
  const Node* single = nullptr;
  bool only_space = true;
  for (const auto& node : *nodes) {
    if (node.kind == Node::Kind::kText) {
      if (!trimSpace(node.text).empty()) {
        only_space = false;
      }
    } else if (node.kind == Node::Kind::kAction && single == nullptr) {
      single = &node;
    } else {
      only_space = false;
    }
  }
  Executor executor(context);
  if (single != nullptr && only_space) {
    auto value = executor.pipeline(single->pipeline);
    if (!value.ok()) {
      return fail(value.error());
    }
    if (value->isObject() || value->isArray()) {
      return value;
    }
    std::string printed = print(*value);
    if (value->isNull() || printed.empty()) {
      return Json(value->isNull() ? printed : std::string());
    }
    // Read back as YAML, as Fleet does when it re-parses the templated values text.
    auto parsed = parseYaml(printed, "template result");
    if (parsed.ok() && (!parsed->isNull() || printed == "null" || printed == "~")) {
      return std::move(parsed).value();
    }
    return Json(printed);
  }
  std::string out;
  FLOTILLA_TRY(executor.run(*nodes, out));
  return Json(out);
}

std::vector<std::string> supportedFunctions() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : functions()) {
    names.push_back(name);
  }
  return names;
}

}  // namespace flotilla::templating
