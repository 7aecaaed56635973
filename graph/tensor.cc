#include "graph/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace onnxtrain {

bool Tensor::sole_owner() const {
  if (bytes_.use_count() != 1) return false;
  // use_count() is a relaxed load: it does not order the other holder's reads before our writes. A copy
  // dropped at once does an acquire-release decrement on the same count, which does (and ThreadSanitizer
  // sees it).
  { const std::shared_ptr<std::byte> synchronise = bytes_; }
  return true;
}

namespace {

// The byte size of a tensor of `sizes`; an Error naming the shape when it does not fit in memory's
// address range (a hostile model's Range or ConstantOfShape), instead of a wrapped count.
size_t checked_byte_count(DType dtype, const std::vector<int64_t>& sizes) {
  int64_t count = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    ONNXTRAIN_CHECK(s >= 0, "negative tensor size");
    overflow = overflow || __builtin_mul_overflow(count, s, &count);
  }
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;  // empty, however large the rest
  uint64_t bytes = 0;
  constexpr uint64_t kMaxBytes = uint64_t{1} << 39;  // 512 GiB: under ASan's 1 TiB, beyond a tensor of any model
  if (overflow || __builtin_mul_overflow(static_cast<uint64_t>(count), dtype_size(dtype), &bytes) ||
      bytes > kMaxBytes) {
    std::string shape;
    for (int64_t s : sizes) shape += (shape.empty() ? "" : ",") + std::to_string(s);
    throw Error("a tensor of shape [" + shape + "] (" + std::string(dtype_name(dtype)) +
                ") needs more than 512 GiB of memory");
  }
  return static_cast<size_t>(bytes);
}

}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> sizes) : dtype_(dtype), sizes_(std::move(sizes)) {
  nbytes_ = checked_byte_count(dtype_, sizes_);
  bytes_ = std::shared_ptr<std::byte>(new std::byte[nbytes_](), std::default_delete<std::byte[]>());  // zeroed
}

Tensor Tensor::wrap(DType dtype, std::vector<int64_t> sizes, std::shared_ptr<std::byte> storage) {
  ONNXTRAIN_CHECK(storage != nullptr, "wrapping no storage");
  Tensor t;
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.nbytes_ = checked_byte_count(dtype, t.sizes_);
  t.bytes_ = std::move(storage);
  return t;
}

Tensor Tensor::scalar_int64(int64_t v) {
  Tensor t(DType::Int64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

Tensor Tensor::vector_int64(const std::vector<int64_t>& values) {
  Tensor t(DType::Int64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<int64_t>().begin());
  return t;
}

int64_t Tensor::numel() const { return std::accumulate(sizes_.begin(), sizes_.end(), int64_t{1}, std::multiplies<>()); }

void Tensor::check_element_size(std::size_t element) const {
  ONNXTRAIN_CHECK(bytes_ != nullptr, "access to an empty tensor");
  ONNXTRAIN_CHECK(element == dtype_size(dtype_),
                  "element type does not match tensor dtype " + std::string(dtype_name(dtype_)));
}

template <typename T>
static void widen(const std::byte* raw, int64_t n, auto& out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<typename std::decay_t<decltype(out)>::value_type>(v));
  }
}

std::vector<int64_t> Tensor::to_int64() const {
  std::vector<int64_t> out;
  int64_t n = numel();
  switch (dtype_) {
    case DType::Int64:
      widen<int64_t>(raw(), n, out);
      break;
    case DType::Int32:
      widen<int32_t>(raw(), n, out);
      break;
    case DType::Int16:
      widen<int16_t>(raw(), n, out);
      break;
    case DType::Int8:
      widen<int8_t>(raw(), n, out);
      break;
    case DType::UInt64:
      widen<uint64_t>(raw(), n, out);
      break;
    case DType::UInt32:
      widen<uint32_t>(raw(), n, out);
      break;
    case DType::UInt16:
      widen<uint16_t>(raw(), n, out);
      break;
    case DType::UInt8:
    case DType::Bool:
      widen<uint8_t>(raw(), n, out);
      break;
    default:
      ONNXTRAIN_CHECK(false, "to_int64() of a " + std::string(dtype_name(dtype_)) + " tensor");
  }
  return out;
}

std::vector<double> Tensor::to_double() const {
  std::vector<double> out;
  int64_t n = numel();
  switch (dtype_) {
    case DType::Float32:
      widen<float>(raw(), n, out);
      break;
    case DType::Float64:
      widen<double>(raw(), n, out);
      break;
    default: {
      for (int64_t v : to_int64()) out.push_back(static_cast<double>(v));
    }
  }
  return out;
}

Tensor Tensor::reshaped(std::vector<int64_t> sizes) const {
  Tensor t = *this;
  t.sizes_ = std::move(sizes);
  ONNXTRAIN_CHECK(t.numel() == numel(), "reshape changes the element count");
  return t;
}

Tensor Tensor::clone() const {
  if (!bytes_) return *this;
  Tensor t(dtype_, sizes_);
  if (nbytes_) std::memcpy(t.raw(), raw(), nbytes_);
  return t;
}

}  // namespace onnxtrain
