// CUDA kernels of Cast (`to`: a type name at opset 1, an ONNX type code from 6) and CastLike (the dtype
// of a second input) between the cheap types float32, float64, int32, int64 and bool, with the reference
// semantics of elementwise::cast_value: float → integer truncates toward zero, NaN → 0, out-of-range
// saturates; → bool is v != 0. Also float32/float64 ↔ float16/bfloat16 (float32 for the casts the autocast
// pass of --precision inserts), rounding to nearest even like the reference (element_convert.h): float64
// rounds once, straight to the half type. Other pairs fail at prepare naming them.
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
// The registered input dtypes: the cheap types and the half types (cast to and from float32 and float64).
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
// float64 rounds once, straight to 16 bits: through float32 it could round twice.
struct DoubleToHalf {
  __device__ uint16_t operator()(double v) const { return __half_raw(__double2half(v)).x; }
};
struct DoubleToBFloat16 {
  __device__ uint16_t operator()(double v) const { return __nv_bfloat16_raw(__double2bfloat16(v)).x; }
};
// Half to F (float or double): exact.
template <typename F>
struct HalfTo {
  __device__ F operator()(uint16_t bits) const {
    __half_raw raw;
    raw.x = bits;
    return static_cast<F>(__half2float(__half(raw)));
  }
};
template <typename F>
struct BFloat16To {
  __device__ F operator()(uint16_t bits) const {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return static_cast<F>(__bfloat162float(__nv_bfloat16(raw)));
  }
};

bool is_half(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }
bool is_wide_float(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

template <typename F>
void launch_from_half(cudaStream_t stream, DType from, const uint16_t* x, F* y, int64_t n) {
  if (from == DType::Float16) {
    launch_map(stream, x, y, n, HalfTo<F>{});
  } else {
    launch_map(stream, x, y, n, BFloat16To<F>{});
  }
}

std::unique_ptr<Kernel> make_half_cast(const KernelSpec& spec, DType from, DType to) {
  if (!(is_wide_float(from) && is_half(to)) && !(is_half(from) && is_wide_float(to))) {
    kernel_fail(spec, "cast from " + std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) +
                          " is not supported by the CUDA kernel (float16 and bfloat16 cast to and from float32 "
                          "and float64)");
  }
  reference::require_output(spec, 0, to, spec.inputs[0].sizes);
  return make_cuda_kernel([from, to](cudaStream_t stream, auto inputs, auto outputs) {
    const int64_t n = outputs[0].numel();
    if (is_half(from)) {
      const auto* x = inputs[0].template as<const uint16_t>();
      if (to == DType::Float32) {
        launch_from_half(stream, from, x, outputs[0].template as<float>(), n);
      } else {
        launch_from_half(stream, from, x, outputs[0].template as<double>(), n);
      }
      return;
    }
    auto* y = outputs[0].template as<uint16_t>();
    if (from == DType::Float32) {
      const auto* x = inputs[0].template as<const float>();
      if (to == DType::Float16) {
        launch_map(stream, x, y, n, FloatToHalf{});
      } else {
        launch_map(stream, x, y, n, FloatToBFloat16{});
      }
    } else {
      const auto* x = inputs[0].template as<const double>();
      if (to == DType::Float16) {
        launch_map(stream, x, y, n, DoubleToHalf{});
      } else {
        launch_map(stream, x, y, n, DoubleToBFloat16{});
      }
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
