#include "graph/error.h"

namespace onnxtrain {

std::string Error::describe() const {
  std::string text;
  if (!file_.empty()) text += file_ + ": ";
  if (has_node_) {
    text += "node '" + node_ + "' (op " + op_type_ + ", domain '" +
            (domain_.empty() ? std::string("ai.onnx") : domain_) + "', opset " + std::to_string(opset_) + "): ";
  }
  return text + message_;
}

const char* Error::what() const noexcept {
  what_ = describe();
  return what_.c_str();
}

void check_failed(const char* condition, const char* file, int line, const std::string& detail) {
  throw std::logic_error(std::string("internal error (please report): ") + condition + " failed at " + file + ":" +
                         std::to_string(line) + (detail.empty() ? "" : ": " + detail));
}

}  // namespace onnxtrain
