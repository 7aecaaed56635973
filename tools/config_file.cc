#include "tools/config_file.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "graph/error.h"
#include "tools/cli_choices.h"

namespace onnxtrain::cli {

std::vector<std::string> expand_config_file(const std::vector<std::string>& argv, const CLI::App* command) {
  if (argv.size() < 2) return argv;
  std::vector<std::string> rest;  // the command line after the command, without --config FILE
  std::string path;
  for (size_t i = 2; i < argv.size(); ++i) {
    if (argv[i] == "--config" && i + 1 < argv.size()) {
      path = argv[++i];
    } else if (argv[i].rfind("--config=", 0) == 0) {
      path = argv[i].substr(9);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (path.empty()) return argv;
  // CLI11 reads a folder as an empty file: a run would go on without the options the user meant to give.
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw Error(path + ": --config: is a folder; --config names a TOML file of options");
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::FileError&) {
    throw Error(path + ": --config: no such file or not readable");
  } catch (const CLI::ParseError& e) {
    throw Error(path + ": --config: not a TOML file of options: " + e.what());
  }
  std::vector<std::string> expanded(argv.begin(), argv.begin() + 2);
  for (const CLI::ConfigItem& item : items) {
    if (!item.parents.empty()) {
      throw Error(path + ": --config: section [" + item.parents.front() + "]: the file holds the options of one " +
                  "command, as `key = value` lines without sections");
    }
    if (item.name == "++" || item.name == "--") continue;  // CLI11's section markers
    // Checked here, by key: CLI11 would blame the model path next to an unknown option's tokens, or next to
    // the second value of a key given twice, which CLI11's TOML reader joins into one item of two values.
    if (command != nullptr) {
      if (const std::string unknown = unknown_option_message(*command, {"--" + item.name}); !unknown.empty())
        throw Error(path + ": --config: " + unknown);
      const CLI::Option* option = command->get_option("--" + item.name);
      if (option->get_type_size_max() > 0 && static_cast<int>(item.inputs.size()) > option->get_items_expected_max())
        throw Error(path + ": --config: '" + item.name + "' has " + std::to_string(item.inputs.size()) +
                    " values and --" + item.name + " takes " + std::to_string(option->get_items_expected_max()) +
                    " (is the key given twice?)");
    }
    if (item.inputs.size() == 1 && (item.inputs[0] == "true" || item.inputs[0] == "false")) {
      if (item.inputs[0] == "true") expanded.push_back("--" + item.name);
      continue;
    }
    expanded.push_back("--" + item.name);
    expanded.insert(expanded.end(), item.inputs.begin(), item.inputs.end());
  }
  expanded.insert(expanded.end(), rest.begin(), rest.end());
  return expanded;
}

}  // namespace onnxtrain::cli
