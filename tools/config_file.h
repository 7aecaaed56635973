// `onnxtrain COMMAND --config FILE ...`: the options of a TOML file (key = value, as CLI11's config_to_str
// writes them; `train` saves one beside every model it writes), placed before the command line's own
// options, so that those win (the commands take the last value of an option given twice).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace onnxtrain::cli {

// argv with "--config FILE" (or "--config=FILE") after the command replaced by the file's options as
// "--key value" tokens right after the command; `flag = true` becomes "--flag", `flag = false` nothing.
// argv unchanged without --config. Throws Error naming the file when it is missing or not TOML, or when a
// key is not an option of `command` (argv[1]; null skips that check) or is given twice.
std::vector<std::string> expand_config_file(const std::vector<std::string>& argv, const CLI::App* command);

}  // namespace onnxtrain::cli
