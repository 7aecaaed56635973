// CUDA kernels of Cast (`to`: a type name at opset 1, an ONNX type code from 6) and CastLike (the dtype
// of a second input) between the cheap types float32, float64, int32, int64 and bool, with the reference
// semantics of elementwise::cast_value: float → integer truncates toward zero, NaN → 0, out-of-range
// saturates; → bool is v != 0. Also float32 ↔ float16/bfloat16 (the casts the autocast pass of --precision
// inserts), rounding to nearest even like the reference (element_convert.h). Other pairs fail at prepare
// naming them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/reference/cast_target.h"

namespace onnxtrain::cuda {
namespace {

using reference::kernel_fail;

const std::vector<DType> kCastDTypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};
// The registered input dtypes: the cheap types and the half types (cast to and from float32 only).
const std::vector<DType> kCastEntryDTypes = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                             DType::Bool,    DType::Float16, DType::BFloat16};

bool castable(DType dtype) { return std::find(kCastDTypes.begin(), kCastDTypes.end(), dtype) != kCastDTypes.end(); }

// Bool is stored as a byte: read as `!= 0`, written as 0/1.
template <typename Fn>
void dispatch_cast_type(DType dtype, Fn&& fn) {
  if (dtype == DType::Bool) return fn(bool{});
  return dispatch_cuda<true>(dtype, fn);
}

template <typename S>
using Storage = std::conditional_t<std::is_same_v<S, bool>, uint8_t, S>;

template <typename D, typename S>
struct CastElement {
  ONNXTRAIN_HOST_DEVICE Storage<D> operator()(Storage<S> v) const {
    if constexpr (std::is_same_v<S, bool>) {
      return static_cast<Storage<D>>(elementwise::cast_value<D>(v != 0));
    } else {
      return static_cast<Storage<D>>(elementwise::cast_value<D>(v));
    }
  }
};

// float32 ↔ float16/bfloat16 on 16-bit storage, rounding to nearest even.
struct FloatToHalf {
  __device__ uint16_t operator()(float v) const { return __half_raw(__float2half_rn(v)).x; }
};
struct FloatToBFloat16 {
  __device__ uint16_t operator()(float v) const { return __nv_bfloat16_raw(__float2bfloat16_rn(v)).x; }
};
struct HalfToFloat {
  __device__ float operator()(uint16_t bits) const {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  }
};
struct BFloat16ToFloat {
  __device__ float operator()(uint16_t bits) const {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
};

bool is_half(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

std::unique_ptr<Kernel> make_half_cast(const KernelSpec& spec, DType from, DType to) {
  if (!(from == DType::Float32 && is_half(to)) && !(is_half(from) && to == DType::Float32)) {
    kernel_fail(spec, "cast from " + std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) +
                          " is not supported by the CUDA kernel (float16 and bfloat16 cast to and from float32)");
  }
  reference::require_output(spec, 0, to, spec.inputs[0].sizes);
  return make_cuda_kernel([from, to](cudaStream_t stream, auto inputs, auto outputs) {
    const int64_t n = outputs[0].numel();
    if (to == DType::Float16) {
      launch_map(stream, inputs[0].template as<const float>(), outputs[0].template as<uint16_t>(), n, FloatToHalf{});
    } else if (to == DType::BFloat16) {
      launch_map(stream, inputs[0].template as<const float>(), outputs[0].template as<uint16_t>(), n,
                 FloatToBFloat16{});
    } else if (from == DType::Float16) {
      launch_map(stream, inputs[0].template as<const uint16_t>(), outputs[0].template as<float>(), n, HalfToFloat{});
    } else {
      launch_map(stream, inputs[0].template as<const uint16_t>(), outputs[0].template as<float>(), n,
                 BFloat16ToFloat{});
    }
  });
}

std::unique_ptr<Kernel> make_cast_to(const KernelSpec& spec, DType to) {
  const DType from = require_cuda_dtype(spec, 0, kCastEntryDTypes);
  if (is_half(from) || is_half(to)) return make_half_cast(spec, from, to);
  if (!castable(to)) {
    kernel_fail(spec, "cast to " + std::string(dtype_name(to)) +
                          " is not supported by the CUDA kernel (float32, float64, int32, int64, bool)");
  }
  reference::require_output(spec, 0, to, spec.inputs[0].sizes);
  return make_cuda_kernel([from, to](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cast_type(from, [&](auto source_zero) {
      using S = decltype(source_zero);
      dispatch_cast_type(to, [&](auto target_zero) {
        using D = decltype(target_zero);
        launch_map(stream, inputs[0].template as<const Storage<S>>(), outputs[0].template as<Storage<D>>(),
                   outputs[0].numel(), CastElement<D, S>{});
      });
    });
  });
}

std::unique_ptr<Kernel> make_cast(const KernelSpec& spec) {
  reference::require_input_count(spec, 1, 1);
  return make_cast_to(spec, reference::cast_target(spec));
}

std::unique_ptr<Kernel> make_cast_like(const KernelSpec& spec) {
  reference::require_input_count(spec, 2, 2);
  if (!reference::has_input(spec, 1)) kernel_fail(spec, "target_type is required");
  return make_cast_to(spec, spec.inputs[1].dtype);
}

}  // namespace

void register_cuda_cast_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("Cast", kCastEntryDTypes, &make_cast));
  registry.add(cuda_entry("CastLike", kCastEntryDTypes, &make_cast_like));
}

}  // namespace onnxtrain::cuda
