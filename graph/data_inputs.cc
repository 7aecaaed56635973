#include "graph/data_inputs.h"

#include <cstring>
#include <set>

#include "graph/error.h"

namespace onnxtrain {

namespace {

int64_t rows_of(const Tensor& t) { return t.rank() > 0 ? t.sizes()[0] : 0; }

}  // namespace

DataInputs::DataInputs(Tensor only) { tensors.emplace_back("", std::move(only)); }

DataInputs::DataInputs(NamedTensors named) : tensors(std::move(named)) {
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    if (!seen.insert(name).second) throw Error("data input '" + name + "' is given twice");
    if (rows_of(tensor) != rows_of(first())) {
      throw Error("data input '" + name + "' has " + std::to_string(rows_of(tensor)) + " rows, '" + tensors[0].first +
                  "' has " + std::to_string(rows_of(first())));
    }
  }
}

int64_t DataInputs::rows() const { return tensors.empty() ? 0 : rows_of(first()); }

DataInputs DataInputs::slice_rows(int64_t begin, int64_t end) const {
  DataInputs part;
  for (const auto& [name, tensor] : tensors) part.tensors.emplace_back(name, onnxtrain::slice_rows(tensor, begin, end));
  return part;
}

Tensor slice_rows(const Tensor& t, int64_t begin, int64_t end) {
  if (t.empty() || (begin == 0 && t.rank() > 0 && end == t.sizes()[0])) return t;
  std::vector<int64_t> sizes = t.sizes();
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(sizes.at(0));
  sizes[0] = end - begin;
  Tensor out(t.dtype(), sizes);
  std::memcpy(out.raw(), t.raw() + static_cast<size_t>(begin) * row_bytes,
              static_cast<size_t>(end - begin) * row_bytes);
  return out;
}

}  // namespace onnxtrain
