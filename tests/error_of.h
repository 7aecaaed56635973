// The message of the onnxtrain::Error a call throws, "" when it throws none: for tests that check what an
// error says.
//
//   EXPECT_NE(error_of([] { parse_strategy_specs("dp:0", 2); }).find("'0' is not a count"), std::string::npos);
#pragma once

#include <functional>
#include <string>

#include "graph/error.h"

namespace onnxtrain::testing_support {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace onnxtrain::testing_support
