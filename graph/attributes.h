// Op attributes: the shared vocabulary between the IR (Node) and the kernels, which never see Nodes.
// A map from name to value with typed getters that fall back to the op's default.
//
//   Attributes a{{"strides", std::vector<int64_t>{2, 2}}};
//   a.get_ints("strides");         // {2, 2}
//   a.get_int("group", 1);         // 1: absent, the default
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain {

using Attribute = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, Tensor>;

struct Attributes : std::map<std::string, Attribute> {
  using std::map<std::string, Attribute>::map;
  Attributes() = default;
  Attributes(std::map<std::string, Attribute> values)
      : std::map<std::string, Attribute>(std::move(values)) {}  // NOLINT

  bool has(const std::string& key) const { return count(key) > 0; }
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& key, const std::vector<int64_t>& fallback = {}) const;
  std::vector<double> get_floats(const std::string& key) const;
  const Tensor* get_tensor(const std::string& key) const;
};

}  // namespace onnxtrain
