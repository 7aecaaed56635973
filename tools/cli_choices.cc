#include "tools/cli_choices.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <iterator>

namespace onnxtrain::cli {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Levenshtein distance (insert, delete, substitute), one row at a time.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(const std::string& given, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 3;  // within 2 edits
  for (const std::string& name : names) {
    const size_t d = edit_distance(lower(given), lower(name));
    if (d < best_distance) best = name, best_distance = d;
  }
  return best;
}

std::string not_one_of(const std::string& what, const std::string& given, const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  std::string message = (what.empty() ? "" : what + " ") + "'" + given + "' is not one of " + list;
  if (const std::string close = closest_name(given, names); !close.empty())
    message += ": did you mean '" + close + "'?";
  return message;
}

CLI::Validator one_of(std::vector<std::string> names) {
  return CLI::Validator(
      [names = std::move(names)](std::string& value) {
        return std::find(names.begin(), names.end(), value) != names.end() ? std::string()
                                                                           : not_one_of("", value, names);
      },
      "", "one_of");
}

namespace {

CLI::Validator number_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& value) {
        const std::string wanted = zero_allowed ? "a number of 0 or more" : "a number above 0";
        double number = 0;
        try {
          size_t used = 0;
          number = std::stod(value, &used);
          if (used != value.size()) return "must be " + wanted + ", got '" + value + "'";
        } catch (const std::exception&) {
          return "must be " + wanted + ", got '" + value + "'";
        }
        if (!std::isfinite(number) || number < 0 || (number == 0 && !zero_allowed))
          return "must be " + wanted + ", got " + value;
        return std::string();
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE", zero_allowed ? "non_negative_number" : "positive_number");
}

}  // namespace

const CLI::Validator positive_number = number_check(false);
const CLI::Validator non_negative_number = number_check(true);

// A whole number 0 ... 2^64 - 1, in digits: CLI11 wrapped -1 and 99999999999999999999 into other seeds.
const CLI::Validator seed_number(
    [](std::string& value) {
      const bool digits = !value.empty() && value.size() <= 20 &&
                          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || (value.size() == 20 && value > "18446744073709551615"))
        return "must be a whole number from 0 to 18446744073709551615, got '" + value + "'";
      return std::string();
    },
    "SEED", "seed_number");

std::string unknown_option_message(const CLI::App& command, const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;  // what follows is positional
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (command.get_option_no_throw(name) != nullptr) continue;
    std::vector<std::string> names;
    for (const CLI::Option* option : command.get_options())
      for (const std::string& long_name : option->get_lnames()) names.push_back("--" + long_name);
    std::string message = "'" + name + "' is not an option of `onnxtrain " + command.get_name() + "`";
    std::string close = closest_name(name, names);
    if (close.empty()) {  // --limit for --limit-batches: the one option it begins, as git's abbreviations
      std::vector<std::string> longer;
      std::copy_if(names.begin(), names.end(), std::back_inserter(longer),
                   [&](const std::string& n) { return n.rfind(name, 0) == 0; });
      if (longer.size() == 1) close = longer.front();
    }
    if (!close.empty()) message += ": did you mean '" + close + "'?";
    return message + " (`onnxtrain " + command.get_name() + " --help` lists them)";
  }
  return "";
}

void usage_error(const std::string& message) { throw CLI::ValidationError(message); }

}  // namespace onnxtrain::cli
