// Usage errors as PyTorch and git users expect them: a value outside a fixed set names the set and the
// closest name ("--strategy: 'ddp' is not one of single, dp, ...: did you mean 'dp'?"), and every usage error exits
// with code 2 (CLI11's ValidationError, which tools/onnxtrain.cc maps to 2), an input error with 1.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace onnxtrain::cli {

// The name closest to `given` by edit distance (case ignored), if it is within 2 edits; else "".
std::string closest_name(const std::string& given, const std::vector<std::string>& names);

// "WHAT 'given' is not one of A, B, C" plus ": did you mean 'X'?" when one is close (WHAT may be empty).
std::string not_one_of(const std::string& what, const std::string& given, const std::vector<std::string>& names);

// A CLI11 check that the value is one of `names`, failing with not_one_of's message (CLI11 prefixes the option).
CLI::Validator one_of(std::vector<std::string> names);

// CLI11 checks of a number (CLI11 prefixes the option): a finite number above 0 ("must be a positive
// number, got 0"), or at 0 or above. CLI11's own PositiveNumber said "Value 0 not in range 0.000000 to
// 1797693134862315708145...", 300 digits of the largest double, and let inf and nan through.
extern const CLI::Validator positive_number;
extern const CLI::Validator non_negative_number;
extern const CLI::Validator seed_number;  // 0 ... 2^64 - 1

// The first token of `args` (a command's arguments) that names a long option `command` lacks, as
// "'--batchh' is not an option of `onnxtrain train`: did you mean '--batch'?", or "" when every one is known.
// CLI11 itself blamed the positional argument next to it ("The following argument was not expected: MODEL").
std::string unknown_option_message(const CLI::App& command, const std::vector<std::string>& args);

// Options that do not go together, or a flag the chosen strategy would ignore: exit 2 with `message`.
[[noreturn]] void usage_error(const std::string& message);

}  // namespace onnxtrain::cli
