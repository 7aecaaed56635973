// `onnxtrain COMMAND --config FILE ...`: the options of a TOML file (key = value, as CLI11's config_to_str
// writes them; `train` saves one beside every model it writes), placed before the command line's own
// options, so that those win (the commands take the last value of an option given twice).
#pragma once

#include <string>
#include <vector>

namespace onnxtrain::cli {

// argv with "--config FILE" (or "--config=FILE") after the command replaced by the file's options as
// "--key value" tokens right after the command; `flag = true` becomes "--flag", `flag = false` nothing.
// argv unchanged without --config. Throws Error naming the file when it is missing or not TOML.
std::vector<std::string> expand_config_file(const std::vector<std::string>& argv);

}  // namespace onnxtrain::cli
