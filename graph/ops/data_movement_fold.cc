#include "graph/ops/data_movement_fold.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace onnxtrain::op_helpers {

namespace {

template <typename T>
T load(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.raw() + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(Tensor& t, int64_t i, T v) {
  std::memcpy(t.raw() + i * sizeof(T), &v, sizeof(T));
}

uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent == 0) {
    float v = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
    return sign ? -v : v;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Round to nearest even, as numpy's astype(float16) does.
uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t magnitude = x & 0x7fffffff;
  if (magnitude >= 0x7f800000) return sign | 0x7c00 | (magnitude > 0x7f800000 ? 0x200 : 0);  // inf, nan
  if (magnitude >= 0x477ff000) return sign | 0x7c00;                                         // rounds past 65504
  if (magnitude < 0x38800000) {  // half subnormal: count units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(std::fabs(f) * 16777216.0f));
  }
  uint32_t odd = (magnitude >> 13) & 1;
  magnitude += 0xfff + odd - (112u << 23);
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

// Round to nearest even, as PyTorch and the Cast kernels do (adding 0x7fff plus the kept bit's parity
// carries into the kept bits exactly when the dropped half is above, or at with an odd kept bit).
uint16_t float_to_bfloat16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

int64_t saturate_to_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t k = sizes.size(); k-- > 1;) strides[k - 1] = strides[k] * sizes[k];
  return strides;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, size_t out_rank) {
  std::vector<int64_t> in_strides = row_major_strides(in), strides(out_rank, 0);
  size_t lead = out_rank - in.size();
  for (size_t k = 0; k < in.size(); ++k) strides[lead + k] = in[k] == 1 ? 0 : in_strides[k];
  return strides;
}

Tensor strided_copy(const Tensor& src, const std::vector<int64_t>& out_sizes, int64_t base,
                    const std::vector<int64_t>& src_strides) {
  Tensor out(src.dtype(), out_sizes);
  const size_t element = dtype_size(src.dtype());
  for_each_strided(out_sizes, base, src_strides, [&](int64_t linear, int64_t offset) {
    std::memcpy(out.raw() + linear * element, src.raw() + offset * element, element);
  });
  return out;
}

Tensor broadcast_to(const Tensor& src, const std::vector<int64_t>& out_sizes) {
  return strided_copy(src, out_sizes, 0, broadcast_strides(src.sizes(), out_sizes.size()));
}

std::optional<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

void for_each_index(const std::vector<int64_t>& sizes, const std::function<void(const std::vector<int64_t>&)>& fn) {
  for (int64_t s : sizes)
    if (s == 0) return;
  std::vector<int64_t> index(sizes.size(), 0);
  while (true) {
    fn(index);
    size_t k = sizes.size();
    while (k > 0 && ++index[k - 1] == sizes[k - 1]) index[--k] = 0;
    if (k == 0) return;
  }
}

void copy_element(const Tensor& src, int64_t src_index, Tensor& dst, int64_t dst_index) {
  const size_t element = dtype_size(src.dtype());
  std::memcpy(dst.raw() + dst_index * element, src.raw() + src_index * element, element);
}

double read_as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return load<float>(t, i);
    case DType::Float64:
      return load<double>(t, i);
    case DType::Float16:
      return half_to_float(load<uint16_t>(t, i));
    case DType::BFloat16:
      return bits_float(static_cast<uint32_t>(load<uint16_t>(t, i)) << 16);
    case DType::UInt64:
      return static_cast<double>(load<uint64_t>(t, i));
    default:
      return static_cast<double>(read_as_int64(t, i));
  }
}

int64_t read_as_int64(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Int8:
      return load<int8_t>(t, i);
    case DType::UInt8:
      return load<uint8_t>(t, i);
    case DType::Bool:
      return load<uint8_t>(t, i) != 0;
    case DType::Int16:
      return load<int16_t>(t, i);
    case DType::UInt16:
      return load<uint16_t>(t, i);
    case DType::Int32:
      return load<int32_t>(t, i);
    case DType::UInt32:
      return load<uint32_t>(t, i);
    case DType::Int64:
      return load<int64_t>(t, i);
    case DType::UInt64:
      return static_cast<int64_t>(load<uint64_t>(t, i));
    case DType::Float32:
    case DType::Float64:
    case DType::Float16:
    case DType::BFloat16:
      return saturate_to_int64(read_as_double(t, i));
    default:
      ONNXTRAIN_CHECK(false, "no numeric view of a " + std::string(dtype_name(t.dtype())) + " tensor");
  }
  return 0;
}

void write_from_int64(Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::Int8:
      store(t, i, static_cast<int8_t>(v));
      break;
    case DType::UInt8:
      store(t, i, static_cast<uint8_t>(v));
      break;
    case DType::Bool:
      store(t, i, static_cast<uint8_t>(v != 0));
      break;
    case DType::Int16:
      store(t, i, static_cast<int16_t>(v));
      break;
    case DType::UInt16:
      store(t, i, static_cast<uint16_t>(v));
      break;
    case DType::Int32:
      store(t, i, static_cast<int32_t>(v));
      break;
    case DType::UInt32:
      store(t, i, static_cast<uint32_t>(v));
      break;
    case DType::Int64:
      store(t, i, v);
      break;
    case DType::UInt64:
      store(t, i, static_cast<uint64_t>(v));
      break;
    case DType::Float32:
      store(t, i, static_cast<float>(v));
      break;
    default:
      write_from_double(t, i, static_cast<double>(v));
  }
}

void write_from_double(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::Float32:
      store(t, i, static_cast<float>(v));
      break;
    case DType::Float64:
      store(t, i, v);
      break;
    case DType::Float16:
      store(t, i, float_to_half(static_cast<float>(v)));
      break;
    case DType::BFloat16:
      store(t, i, float_to_bfloat16(static_cast<float>(v)));
      break;
    case DType::Bool:
      store(t, i, static_cast<uint8_t>(v != 0));
      break;
    case DType::UInt64:
      store(t, i, v >= 0 && v < 1.8446744073709552e19 ? static_cast<uint64_t>(v) : 0);
      break;
    default:
      ONNXTRAIN_CHECK(is_integer(t.dtype()), "no numeric view of a " + std::string(dtype_name(t.dtype())) + " tensor");
      write_from_int64(t, i, saturate_to_int64(v));
  }
}

Tensor cast_tensor(const Tensor& src, DType to) {
  auto numeric = [](DType d) { return is_floating(d) || is_integer(d) || d == DType::Bool; };
  ONNXTRAIN_CHECK(numeric(src.dtype()) && numeric(to), "cast between non-numeric dtypes");
  Tensor out(to, src.sizes());
  const int64_t n = src.numel();
  if (src.dtype() == to) {
    for (int64_t i = 0; i < n; ++i) copy_element(src, i, out, i);
  } else if (is_floating(src.dtype()) || is_floating(to)) {
    for (int64_t i = 0; i < n; ++i) write_from_double(out, i, read_as_double(src, i));
  } else {
    for (int64_t i = 0; i < n; ++i) write_from_int64(out, i, read_as_int64(src, i));
  }
  return out;
}

Tensor tensor_from_int64(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& values) {
  Tensor out(dtype, sizes);
  ONNXTRAIN_CHECK(static_cast<int64_t>(values.size()) == out.numel(), "value count does not match the sizes");
  for (size_t i = 0; i < values.size(); ++i) write_from_int64(out, static_cast<int64_t>(i), values[i]);
  return out;
}

}  // namespace onnxtrain::op_helpers
