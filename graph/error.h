// Errors. `Error` is what a user can cause (bad file, unknown op, bad shape): it carries the context a
// user needs to fix the input and the CLI turns it into one line and exit code 1. `ONNXTRAIN_CHECK`
// guards broken invariants inside onnxtrain itself (a bug, not a user mistake).
//
//   throw Error("shape inference failed: Conv expects 4-D input").at_node(node.name, "Conv", "", 13);
#pragma once

#include <stdexcept>
#include <string>

namespace onnxtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(message), message_(std::move(message)) {}

  Error& in_file(std::string path) {
    if (file_.empty()) file_ = std::move(path);
    return *this;
  }
  Error& at_node(std::string name, std::string op_type, std::string domain, int opset) {
    if (!has_node_) {
      has_node_ = true;
      node_ = std::move(name);
      op_type_ = std::move(op_type);
      domain_ = std::move(domain);
      opset_ = opset;
    }
    return *this;
  }

  const std::string& message() const { return message_; }
  const std::string& file() const { return file_; }
  bool has_node() const { return has_node_; }
  const std::string& node() const { return node_; }
  const std::string& op_type() const { return op_type_; }

  // "FILE: node 'NAME' (op Conv, domain 'ai.onnx', opset 13): MESSAGE"
  std::string describe() const;
  const char* what() const noexcept override;

 private:
  std::string message_;
  std::string file_;
  bool has_node_ = false;
  std::string node_, op_type_, domain_;
  int opset_ = 0;
  mutable std::string what_;
};

// An internal invariant; failing means a bug in onnxtrain. Throws std::logic_error (never exits).
[[noreturn]] void check_failed(const char* condition, const char* file, int line, const std::string& detail);

}  // namespace onnxtrain

#define ONNXTRAIN_CHECK(cond, detail)                                            \
  do {                                                                           \
    if (!(cond)) ::onnxtrain::check_failed(#cond, __FILE__, __LINE__, (detail)); \
  } while (0)
