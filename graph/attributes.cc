#include "graph/attributes.h"

namespace onnxtrain {

template <typename T>
static const T* find_attr(const Attributes& attributes, const std::string& key) {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : std::get_if<T>(&it->second);
}

int64_t Attributes::get_int(const std::string& key, int64_t fallback) const {
  const auto* v = find_attr<int64_t>(*this, key);
  return v ? *v : fallback;
}

double Attributes::get_float(const std::string& key, double fallback) const {
  const auto* v = find_attr<double>(*this, key);
  return v ? *v : fallback;
}

std::string Attributes::get_string(const std::string& key, const std::string& fallback) const {
  const auto* v = find_attr<std::string>(*this, key);
  return v ? *v : fallback;
}

std::vector<int64_t> Attributes::get_ints(const std::string& key, const std::vector<int64_t>& fallback) const {
  const auto* v = find_attr<std::vector<int64_t>>(*this, key);
  return v ? *v : fallback;
}

std::vector<double> Attributes::get_floats(const std::string& key) const {
  const auto* v = find_attr<std::vector<double>>(*this, key);
  return v ? *v : std::vector<double>{};
}

const Tensor* Attributes::get_tensor(const std::string& key) const { return find_attr<Tensor>(*this, key); }

}  // namespace onnxtrain
