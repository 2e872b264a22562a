#include "flotilla/template/template.h"

#include <chrono>
#include <optional>

#include "flotilla/core/yaml.h"
#include "template_internal.h"

namespace flotilla::templating {
namespace {

using namespace detail;  // NOLINT(google-build-using-namespace): the library's own internals

//! The size of a value a function returned, as far as it can grow a result: a string's bytes (maps and lists come
//! from the context or from parsing a bounded string).
size_t builtBytes(const Json& value) {
  return value.isString() ? value.asString().size() : 0;
}

class Executor {
 public:
  Executor(const Json& context, const Limits& limits)
      : root_(context),
        limits_(limits),
        value_limit_(limits.max_output_bytes),
        deadline_(std::chrono::steady_clock::now() + limits.max_time) {}

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
      if (out.size() > limits_.max_output_bytes) {
        return fail(ErrorKind::kInvalid,
                    "template output exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
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

  //! Counts one evaluation step and checks the step and time limits; the error names the column and the limit.
  Status step(size_t column) {
    if (++steps_ > limits_.max_steps) {
      return fail(syntaxError(
          column, "template exceeds the limit of " + std::to_string(limits_.max_steps) + " evaluation steps"));
    }
    if (std::chrono::steady_clock::now() > deadline_) {
      return fail(syntaxError(
          column, "template evaluation exceeds the time limit of " + std::to_string(limits_.max_time.count()) + " ms"));
    }
    return {};
  }

  Result<Json> operand(const Operand& op) {
    FLOTILLA_TRY(step(op.column));
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

  //! "wrong number of arguments" unless `count` fits the function's arity.
  static Status checkArity(const Operand& head, const FunctionSpec& spec, size_t count) {
    const auto given = static_cast<int>(count);
    if (given >= spec.min_args && (spec.max_args < 0 || given <= spec.max_args)) {
      return okStatus();
    }
    const std::string wanted =
        std::to_string(spec.min_args) + (spec.max_args == spec.min_args ? std::string()
                                         : spec.max_args < 0            ? " or more"
                                                                        : "-" + std::to_string(spec.max_args));
    return fail(located(
        head, argError(head.name, "wrong number of arguments: got " + std::to_string(count) + ", want " + wanted)));
  }

  static Error located(const Operand& head, const Error& error) {
    return Error{error.kind, "column " + std::to_string(head.column + 1) + ": " + error.message, error.where};
  }

  //! and/or: evaluates operands in order and stops at the first that decides the result (Go returns it).
  Result<Json> shortCircuit(bool is_and, const std::vector<const Operand*>& operands,
                            const std::optional<Json>& piped) {
    Result<Json> last = Json();
    for (const Operand* op : operands) {
      last = operand(*op);
      if (!last.ok() || truthy(*last) != is_and) {
        return last;
      }
    }
    if (piped) {
      last = *piped;
    }
    return last;
  }

  Result<Json> call(const Operand& head, const std::vector<const Operand*>& operands,
                    const std::optional<Json>& piped) {
    const auto& spec = functions().at(head.name);
    FLOTILLA_TRY(checkArity(head, spec, operands.size() + (piped ? 1 : 0)));
    if (head.name == "and" || head.name == "or") {
      return shortCircuit(head.name == "and", operands, piped);
    }
    Args args;
    for (const Operand* op : operands) {
      auto value = operand(*op);
      FLOTILLA_TRY(value);
      args.push_back(std::move(value).value());
    }
    if (piped) {
      args.push_back(*piped);
    }
    FLOTILLA_TRY(step(head.column));
    auto result = spec.call(args);
    if (!result.ok()) {
      return fail(located(head, result.error()));
    }
    if (builtBytes(*result) > limits_.max_output_bytes) {
      return fail(located(head, valueTooLarge(head.name)));
    }
    return result;
  }

  const Json& root_;
  const Limits& limits_;
  ValueLimitScope value_limit_;
  std::chrono::steady_clock::time_point deadline_;
  size_t steps_ = 0;
};

//! The one action of a template that is exactly one action with only white space around it; null otherwise.
const Node* singleAction(const NodeList& nodes) {
  const Node* single = nullptr;
  for (const auto& node : nodes) {
    if (node.kind == Node::Kind::kText) {
      if (!trimSpace(node.text).empty()) {
        return nullptr;
      }
    } else if (node.kind == Node::Kind::kAction && single == nullptr) {
      single = &node;
    } else {
      return nullptr;
    }
  }
  return single;
}

//! The value of a lone action: maps and lists keep their type, scalars are printed and read back as YAML.
Result<Json> typedValue(Executor& executor, const Node& action) {
  auto value = executor.pipeline(action.pipeline);
  FLOTILLA_TRY(value);
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

}  // namespace

bool hasTemplate(std::string_view text) {
  return text.find(kOpen) != std::string_view::npos;
}

Result<std::string> render(std::string_view text, const Json& context, const Limits& limits) {
  auto nodes = parseTemplate(text);
  if (!nodes.ok()) {
    return fail(nodes.error());
  }
  std::string out;
  Executor executor(context, limits);
  FLOTILLA_TRY(executor.run(*nodes, out));
  return out;
}

Result<Json> evaluateValue(std::string_view text, const Json& context, const Limits& limits) {
  auto nodes = parseTemplate(text);
  FLOTILLA_TRY(nodes);
  Executor executor(context, limits);
  if (const Node* single = singleAction(*nodes); single != nullptr) {
    return typedValue(executor, *single);
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
