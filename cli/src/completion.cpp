// `flotilla completion bash|zsh`: a completion script generated from the command table and the CLI11 definitions,
// so it cannot drift from the flags the binary accepts. zsh loads the same function through bashcompinit.
#include <set>

#include <CLI/CLI.hpp>

#include "command_line.h"

namespace flotilla::cli {

namespace {

//! Every spelling of `option` ("-n --namespace --workspace").
std::vector<std::string> spellings(const CLI::Option& option) {
  std::vector<std::string> names;
  for (const auto& name : option.get_snames()) {
    names.push_back("-" + name);
  }
  for (const auto& name : option.get_lnames()) {
    names.push_back("--" + name);
  }
  return names;
}

//! The flags of one app (positionals excluded).
std::vector<const CLI::Option*> flagsOf(const CLI::App& app) {
  return app.get_options([](const CLI::Option* option) { return option->nonpositional(); });
}

bool takesValue(const CLI::Option& option) {
  return option.get_expected_max() > 0;
}

std::string join(const std::vector<std::string>& words) {
  std::string joined;
  for (const auto& word : words) {
    joined += (joined.empty() ? "" : " ") + word;
  }
  return joined;
}

//! Whether the global flag `option` applies to `command` (null: before any command, where every one does).
bool applies(const CLI::Option& option, const Command* command) {
  if (command == nullptr) {
    return true;
  }
  if (option.check_name("--help")) {
    return false;  // the command has its own
  }
  if (option.check_name("-n")) {
    return !command->workspace_help.empty();
  }
  if (option.check_name("-o")) {
    return !command->outputs.empty();
  }
  return command->uses_hub;  // the NATS flags, --timeout, -A
}

//! The global flags `command` accepts, every spelling.
std::vector<std::string> globalFlagWords(const CLI::App& root, const Command* command) {
  std::vector<std::string> words;
  for (const auto* option : flagsOf(root)) {
    if (applies(*option, command)) {
      for (auto& spelling : spellings(*option)) {
        words.push_back(std::move(spelling));
      }
    }
  }
  return words;
}

//! `case "$prev"` arms for flags whose value is a path (type FILE or DIR) and for the other value flags.
std::string valueArms(const CLI::App& root) {
  std::set<std::string> files;
  std::set<std::string> others;
  auto collect = [&](const CLI::App& app) {
    for (const auto* option : flagsOf(app)) {
      if (!takesValue(*option) || option->check_name("-o")) {
        continue;
      }
      for (auto& spelling : spellings(*option)) {
        (option->get_type_name() == "FILE" ? files : others).insert(spelling);
      }
    }
  };
  collect(root);
  for (const auto* sub : root.get_subcommands([](const CLI::App*) { return true; })) {
    collect(*sub);
  }
  auto alternatives = [](const std::set<std::string>& words) {
    std::string joined;
    for (const auto& word : words) {
      joined += (joined.empty() ? "" : "|") + word;
    }
    return joined;
  };
  std::string arms;
  if (!files.empty()) {
    arms += "    " + alternatives(files) + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  }
  if (!others.empty()) {
    arms += "    " + alternatives(others) + ") return ;;\n";
  }
  return arms;
}

//! Every flag that takes a value, space-padded for a `*" $word "*` test.
std::string valueFlagList(const CLI::App& root) {
  std::set<std::string> words;
  auto collect = [&](const CLI::App& app) {
    for (const auto* option : flagsOf(app)) {
      if (takesValue(*option)) {
        for (auto& spelling : spellings(*option)) {
          words.insert(std::move(spelling));
        }
      }
    }
  };
  collect(root);
  for (const auto* sub : root.get_subcommands([](const CLI::App*) { return true; })) {
    collect(*sub);
  }
  return " " + join(std::vector<std::string>(words.begin(), words.end())) + " ";
}

//! One `case "$cmd"` arm: the command's flags, its -o values and what its first argument completes to.
std::string commandArm(const CLI::App& root, const Command& command) {
  const CLI::App* sub = root.get_subcommand(std::string(command.name));
  std::vector<std::string> flags = globalFlagWords(root, &command);
  for (const auto* option : flagsOf(*sub)) {
    for (auto& spelling : spellings(*option)) {
      flags.push_back(std::move(spelling));
    }
  }
  std::vector<std::string> outputs(command.outputs.begin(), command.outputs.end());
  std::vector<std::string> words(command.argument_words.begin(), command.argument_words.end());
  return "    " + std::string(command.name) + ") flags=\"" + join(flags) + "\"; outputs=\"" + join(outputs) +
         "\"; words=\"" + join(words) + "\" ;;\n";
}

constexpr std::string_view kBashHead = R"(_flotilla() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="" cmd="" word i args=0
  ((COMP_CWORD > 0)) && prev="${COMP_WORDS[COMP_CWORD-1]}"
  COMPREPLY=()
  # The command is the first word that is neither a flag nor a flag's value.
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    if [[ "$_flotilla_value_flags" == *" $word "* ]]; then ((i++)); continue; fi
    [[ "$word" == -* ]] && continue
    if [[ -z "$cmd" ]]; then cmd="$word"; else ((args++)); fi
  done
  local flags outputs words
  case "$cmd" in
)";

constexpr std::string_view kBashTail = R"(  esac
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "$outputs" -- "$cur")); return ;;
)";

constexpr std::string_view kBashEnd = R"(  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif ((args == 0)) && [[ "$words" == "<dir>" ]]; then
    COMPREPLY=($(compgen -d -- "$cur"))
  elif ((args == 0)); then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}
complete -F _flotilla flotilla
)";

std::string bashScript(const CLI::App& root) {
  std::string script =
      "# bash completion for flotilla, generated by 'flotilla completion bash'.\n"
      "# Load it with: source <(flotilla completion bash)\n";
  script += "_flotilla_value_flags='" + valueFlagList(root) + "'\n";
  script += kBashHead;
  std::vector<std::string> names;
  for (const auto& command : commandTable()) {
    names.emplace_back(command.name);
    script += commandArm(root, command);
  }
  script += "    *) flags=\"" + join(globalFlagWords(root, nullptr)) + "\"; outputs=\"\"; words=\"" + join(names) +
            "\"; [[ -z \"$cmd\" ]] || words=\"\" ;;\n";
  script += kBashTail;
  script += valueArms(root);
  script += kBashEnd;
  return script;
}

}  // namespace

std::string completionScript(const CLI::App& app, std::string_view shell) {
  if (shell == "zsh") {
    return "#compdef flotilla\n# zsh completion for flotilla, generated by 'flotilla completion zsh'.\n"
           "# Load it with: source <(flotilla completion zsh)   (after compinit)\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           bashScript(app);
  }
  return bashScript(app);
}

}  // namespace flotilla::cli
