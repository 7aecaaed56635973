// A host tensor: dtype, static sizes and a contiguous row-major byte buffer. Initializers, folded
// constants and (later) kernel inputs on the host use it. Copies share the buffer (cheap); `clone()`
// makes a deep copy. The buffer is the tensor's own, or memory someone else manages (`wrap`: page-locked
// memory for uploads to a GPU, kernels/cuda/cuda_runtime.h pinned_tensor).
//
//   Tensor t(DType::Int64, {3});
//   t.data<int64_t>()[0] = 7;
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graph/dtype.h"
#include "graph/error.h"

namespace onnxtrain {

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> sizes);  // zero-filled

  // A tensor over `storage`, which holds at least numel · dtype size bytes and is released by its own
  // deleter when the last copy of the tensor goes.
  static Tensor wrap(DType dtype, std::vector<int64_t> sizes, std::shared_ptr<std::byte> storage);
  static Tensor scalar_int64(int64_t v);
  static Tensor vector_int64(const std::vector<int64_t>& values);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  int64_t rank() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const;
  std::size_t nbytes() const { return nbytes_; }
  bool empty() const { return !bytes_; }
  // No other tensor shares the buffer: its holder may hand it on for reuse (InferenceSession::recycle).
  // No other Tensor holds the buffer, and every access another thread made through one before dropping it
  // happened before this returns true (a pipeline stage recycles a buffer its neighbour read: send_shared).
  bool sole_owner() const;

  std::byte* raw() { return bytes_.get(); }
  const std::byte* raw() const { return bytes_.get(); }

  template <typename T>
  std::span<T> data() {
    check_element_size(sizeof(T));
    return {reinterpret_cast<T*>(raw()), static_cast<size_t>(numel())};
  }
  template <typename T>
  std::span<const T> data() const {
    check_element_size(sizeof(T));
    return {reinterpret_cast<const T*>(raw()), static_cast<size_t>(numel())};
  }

  // Integer elements (any integer or bool dtype) widened to int64; for index and shape tensors.
  std::vector<int64_t> to_int64() const;
  // Floating elements (float32/float64) widened to double.
  std::vector<double> to_double() const;

  Tensor reshaped(std::vector<int64_t> sizes) const;  // same buffer, new sizes (numel must match)
  Tensor clone() const;

 private:
  void check_element_size(std::size_t element) const;

  DType dtype_ = DType::Undefined;
  std::vector<int64_t> sizes_;
  std::shared_ptr<std::byte> bytes_;
  std::size_t nbytes_ = 0;
};

}  // namespace onnxtrain
