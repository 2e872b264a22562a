// The pieces of libs/template shared between its files (private to the library): tokens and the syntax tree
// (lexer.cpp, parser.cpp), Go's value rules (values.cpp), printf (printf.cpp) and the function table
// (functions.cpp). template.cpp evaluates the tree.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::templating::detail {

inline constexpr std::string_view kOpen = "${";
inline constexpr char kClose = '}';
inline constexpr int kMaxDepth = 64;  // nesting of if/parentheses: keeps a hostile template from exhausting the stack

//! kInvalid with the 1-based column in front: "column 4: ...".
Error syntaxError(size_t column, const std::string& message);

// ---- tokens (lexer.cpp) ----

struct Token {
  enum class Kind { kField, kDollar, kIdent, kString, kInt, kDouble, kPipe, kLParen, kRParen };
  Kind kind;
  std::string text;                 //!< identifier, string value
  std::vector<std::string> fields;  //!< kField/kDollar: the chain after the dot
  Json number;
  size_t column = 0;
};

bool isIdentChar(char c);
//! Tokenises the inside of one action (between the delimiters). `base` is its column in the whole text.
Result<std::vector<Token>> tokenize(std::string_view text, size_t base);

// ---- syntax tree (parser.cpp) ----

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

Result<NodeList> parseTemplate(std::string_view text);

// ---- values (values.cpp) ----

using Args = std::vector<Json>;

//! Go's truth: false, 0, nil, and empty strings, lists and maps are false.
bool truthy(const Json& value);
//! Go's default formatting (%v) of a value.
std::string print(const Json& value);
//! Go's strconv.Quote.
std::string goQuote(std::string_view text);
//! `text` without leading and trailing white space.
std::string trimSpace(std::string_view text);
//! "error calling <function>: <message>".
Error argError(const std::string& function, const std::string& message);
//! A string argument; numbers and bools are converted as sprig's toString does.
Result<std::string> needString(const std::string& function, const Json& value, const char* what);
//! Comparison for eq/ne/lt/...: numbers compare by value, strings and bools by equality/order. Mixed kinds are an
//! error (Go: "incompatible types for comparison"). -1, 0 or 1.
Result<int> compare(const std::string& function, const Json& a, const Json& b, bool ordering);

// ---- printf (printf.cpp) ----

//! Go's fmt.Sprintf over args[0] (the format) and the rest.
Result<std::string> sprintf(const Args& args);

// ---- functions (functions.cpp) ----

using Function = std::function<Result<Json>(const Args&)>;

struct FunctionSpec {
  int min_args;
  int max_args;   //!< -1: any
  Function call;  //!< null for and/or, which the executor evaluates (they short-circuit)
};

using FunctionTable = std::map<std::string, FunctionSpec, std::less<>>;

const FunctionTable& functions();

//! The largest string a function may build in the evaluation running on this thread (Limits::max_output_bytes;
//! the executor sets it, functions read it before building a result whose size they can compute first).
size_t maxValueBytes();
//! Sets maxValueBytes() for the evaluations on this thread while it lives.
class ValueLimitScope {
 public:
  explicit ValueLimitScope(size_t max_bytes);
  ~ValueLimitScope();
  ValueLimitScope(const ValueLimitScope&) = delete;
  ValueLimitScope& operator=(const ValueLimitScope&) = delete;

 private:
  size_t previous_;
};
//! kInvalid "error calling <function>: the result exceeds the template output limit of N bytes".
Error valueTooLarge(const std::string& function);

}  // namespace flotilla::templating::detail
