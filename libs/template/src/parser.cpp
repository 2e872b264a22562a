// The parser: template text to a syntax tree (text, actions, if/else chains).
#include <cctype>
#include <optional>
#include <utility>

#include "template_internal.h"

namespace flotilla::templating::detail {
namespace {

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
        if (functions().count(token.text) == 0) {
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

//! A pipeline that must use every token (a stray ')' is an error).
Result<Pipeline> parseWholePipeline(const std::vector<Token>& tokens, int depth) {
  PipelineParser parser(tokens, 0, tokens.size());
  auto pipeline = parser.parse(depth);
  if (!pipeline.ok()) {
    return fail(pipeline.error());
  }
  if (parser.position() != tokens.size()) {
    return fail(syntaxError(tokens[parser.position()].column, "unexpected ')'"));
  }
  return pipeline;
}

bool isUnsupportedAction(const std::string& word) {
  for (const char* name : {"range", "with", "define", "template", "block", "break", "continue"}) {
    if (word == name) {
      return true;
    }
  }
  return false;
}

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
      auto action = nextAction(nodes);
      if (!action.ok()) {
        return fail(action.error());
      }
      if (!action->has_value()) {
        break;
      }
      if ((*action)->comment) {
        continue;
      }
      if ((*action)->tokens.empty()) {
        return fail(syntaxError((*action)->column, "empty action"));
      }
      FLOTILLA_TRY(addAction((*action)->tokens, depth, nodes, closing));
      if (!closing.empty()) {
        return nodes;
      }
    }
    return nodes;
  }

  //! Appends the text before the next action to `nodes` (trimmed when the action opens with "${- ") and reads
  //! that action; nullopt when no action is left.
  Result<std::optional<Action>> nextAction(NodeList& nodes) {
    size_t open = text_.find(kOpen, pos_);
    std::string literal(text_.substr(pos_, open == std::string_view::npos ? std::string_view::npos : open - pos_));
    if (open == std::string_view::npos) {
      pos_ = text_.size();
      appendText(nodes, std::move(literal));
      return std::optional<Action>();
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
    return std::optional<Action>(std::move(action).value());
  }

  //! One action: `end`/`else` close the current list (set `closing`), `if` opens a nested one, anything else
  //! is a pipeline whose value is printed.
  Status addAction(const std::vector<Token>& tokens, int depth, NodeList& nodes, std::string& closing) {
    const Token& head = tokens[0];
    if (head.kind == Token::Kind::kIdent) {
      if (head.text == "end") {
        if (tokens.size() > 1) {
          return fail(syntaxError(tokens[1].column, "unexpected text after end"));
        }
        closing = "end";
        closing_column_ = head.column;
        return okStatus();
      }
      if (head.text == "else") {
        closing = "else";
        closing_column_ = head.column;
        else_tokens_.assign(tokens.begin() + 1, tokens.end());
        return okStatus();
      }
      if (head.text == "if") {
        auto node = parseIf(tokens, 1, head.column, depth);
        FLOTILLA_TRY(node);
        nodes.push_back(std::move(node).value());
        return okStatus();
      }
      if (isUnsupportedAction(head.text)) {
        return fail(syntaxError(head.column, "unsupported action \"" + head.text + "\""));
      }
    }
    auto pipeline = parseWholePipeline(tokens, 0);
    FLOTILLA_TRY(pipeline);
    Node node;
    node.kind = Node::Kind::kAction;
    node.pipeline = std::move(pipeline).value();
    nodes.push_back(std::move(node));
    return okStatus();
  }

  Result<Node> parseIf(const std::vector<Token>& tokens, size_t first, size_t column, int depth) {
    Node node;
    node.kind = Node::Kind::kIf;
    std::vector<Token> condition(tokens.begin() + static_cast<std::ptrdiff_t>(first), tokens.end());
    while (true) {
      if (condition.empty()) {
        return fail(syntaxError(column, "missing condition in if"));
      }
      auto pipeline = parseWholePipeline(condition, depth + 1);
      if (!pipeline.ok()) {
        return fail(pipeline.error());
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
      std::vector<Token> rest = std::exchange(else_tokens_, {});
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

  //! Skips a comment action `${/* ... */}` whose comment starts at `probe`.
  Result<Action> readComment(size_t open, size_t probe) {
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
    return Action{.tokens = {}, .column = open, .comment = true};
  }

  //! The position of the closing delimiter of the action opened at `open`, skipping string literals.
  Result<size_t> findClose(size_t open, size_t inner) const {
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
    return i;
  }

  //! Reads the action that starts at `open` (the "${"); its contents start at `inner`.
  Result<Action> readAction(size_t open, size_t inner) {
    size_t probe = inner;
    while (probe < text_.size() && text_[probe] == ' ') {
      ++probe;
    }
    if (text_.substr(probe, 2) == "/*") {
      return readComment(open, probe);
    }
    auto close = findClose(open, inner);
    FLOTILLA_TRY(close);
    size_t content_end = *close;
    bool trim_after = false;
    if (content_end > inner && text_[content_end - 1] == '-' &&
        (content_end - 1 == inner || std::isspace(static_cast<unsigned char>(text_[content_end - 2])) != 0)) {
      trim_after = true;
      --content_end;
    }
    auto tokens = tokenize(text_.substr(inner, content_end - inner), inner);
    FLOTILLA_TRY(tokens);
    pos_ = *close + 1;
    if (trim_after) {
      skipSpace();
    }
    return Action{.tokens = std::move(tokens).value(), .column = open, .comment = false};
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

}  // namespace

Result<NodeList> parseTemplate(std::string_view text) {
  return TemplateParser(text).parse();
}

}  // namespace flotilla::templating::detail
