// The lexer: the inside of one action as tokens.
#include <cctype>
#include <charconv>

#include "template_internal.h"

namespace flotilla::templating::detail {
namespace {

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

// A number literal at text[i] (sign allowed): an int when it reads as one, else a double.
Result<Token> readNumber(std::string_view text, size_t& i, size_t column) {
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
    return Token{Token::Kind::kInt, literal, {}, Json(as_int), column};
  }
  double as_double = 0;
  if (auto [p, ec] = std::from_chars(first, last, as_double); ec == std::errc() && p == last) {
    return Token{Token::Kind::kDouble, literal, {}, Json(as_double), column};
  }
  return fail(syntaxError(column, "bad number syntax: " + literal));
}

bool startsNumber(std::string_view text, size_t i) {
  auto digit = [&](size_t k) { return k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])) != 0; };
  return digit(i) || ((text[i] == '-' || text[i] == '+') && digit(i + 1));
}

// An identifier (function name, true/false/nil, if/else/end) at text[i].
Result<Token> readIdent(std::string_view text, size_t& i, size_t base) {
  const size_t start = i;
  while (i < text.size() && isIdentChar(text[i])) {
    ++i;
  }
  if (i < text.size() && text[i] == '.') {
    return fail(syntaxError(base + i, "fields of a function result are not supported; use a pipeline"));
  }
  return Token{Token::Kind::kIdent, std::string(text.substr(start, i - start)), {}, {}, base + start};
}

// `.A.B` or `$.A.B` at text[i].
Result<Token> readFieldToken(std::string_view text, size_t& i, size_t column) {
  if (text[i] == '.') {
    return Token{Token::Kind::kField, ".", readFieldChain(text, i), {}, column};
  }
  ++i;
  if (i < text.size() && isIdentChar(text[i])) {
    return fail(syntaxError(column, "variables are not supported (only $)"));
  }
  return Token{Token::Kind::kDollar, "$", readFieldChain(text, i), {}, column};
}

// A "quoted" or `raw` string literal at text[i].
Result<Token> readString(std::string_view text, size_t& i, size_t base) {
  const size_t column = base + i;
  if (text[i] == '"') {
    auto value = readQuoted(text, i, base);
    if (!value.ok()) {
      return fail(value.error());
    }
    return Token{Token::Kind::kString, std::move(value).value(), {}, {}, column};
  }
  size_t end = text.find('`', i + 1);
  if (end == std::string_view::npos) {
    return fail(syntaxError(column, "unterminated raw string"));
  }
  Token token{Token::Kind::kString, std::string(text.substr(i + 1, end - i - 1)), {}, {}, column};
  i = end + 1;
  return token;
}

// The token that starts at text[i] (not white space).
Result<Token> readToken(std::string_view text, size_t& i, size_t base) {
  const char c = text[i];
  const size_t column = base + i;
  switch (c) {
    case '|':
      ++i;
      return Token{Token::Kind::kPipe, "|", {}, {}, column};
    case '(':
      ++i;
      return Token{Token::Kind::kLParen, "(", {}, {}, column};
    case ')':
      ++i;
      return Token{Token::Kind::kRParen, ")", {}, {}, column};
    case '.':
    case '$':
      return readFieldToken(text, i, column);
    case '"':
    case '`':
      return readString(text, i, base);
    case ':':
    case '=':
      return fail(syntaxError(column, "variable declarations are not supported"));
    default:
      break;
  }
  if (startsNumber(text, i)) {
    return readNumber(text, i, column);
  }
  if (isIdentChar(c)) {
    return readIdent(text, i, base);
  }
  return fail(syntaxError(column, std::string("unexpected character '") + c + "' in an action"));
}

}  // namespace

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

Result<std::vector<Token>> tokenize(std::string_view text, size_t base) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i])) != 0) {
      ++i;
      continue;
    }
    auto token = readToken(text, i, base);
    if (!token.ok()) {
      return fail(token.error());
    }
    tokens.push_back(std::move(token).value());
  }
  return tokens;
}

}  // namespace flotilla::templating::detail
