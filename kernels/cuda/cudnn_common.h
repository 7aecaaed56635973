// What the cuDNN/cuBLAS kernels of kernels/cuda/ share: owned cuDNN descriptors (created at prepare,
// destroyed with the kernel), prepare-time validation by the reference kernel (so attribute errors read
// the same on every device), the KernelEntry of a "cuda" kernel, float32-only checks, and the element
// types of the convolution and matrix-product kernels (float32; float16 and bfloat16 for --precision).
// Included only under kernels/cuda/ (it includes cuDNN).
//
//   validate_with_reference(spec);                     // the reference kernel's attribute/shape errors
//   cuda::TensorDescriptor x_desc(*cudnn_dims(x.sizes));
//   registry.add(cuda_entry("", "Conv", &make_conv));
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cudnn_params.h"
#include "kernels/cuda/kernel_entry.h"
#include "kernels/cuda/math_mode.h"
#include "kernels/kernel.h"
#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::cuda {

// The entry of a float32 "cuda" kernel (kernel_entry.h).
inline KernelEntry cuda_entry(std::string domain, std::string op_type, KernelFactory factory) {
  return cuda_kernel_entry(std::move(domain), std::move(op_type), {DType::Float32}, factory);
}

// The dtypes of the cuDNN convolutions and the cuBLAS products: float32, and float16/bfloat16 with
// float32 accumulation (cuDNN's pseudo-half configurations, cublasGemmEx with CUBLAS_COMPUTE_32F), which
// the autocast pass of --precision puts them in.
inline const std::vector<DType> kConvGemmDTypes = {DType::Float32, DType::Float16, DType::BFloat16};
inline bool is_half(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

// Prepares (and drops) the CPU reference kernel of the same spec: it validates attributes, dtypes and
// sizes, failing with the message every device shares.
inline void validate_with_reference(const KernelSpec& spec) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (entry) entry->prepare(spec);
}

// Fails unless the first `inputs` and `outputs` present inputs and outputs (all by default; AveragePoolGrad's
// x_shape and MaxPool's Indices are int64) are float32: the CUDA kernels of this family are float32.
inline void require_all_float32(const KernelSpec& spec, size_t inputs = SIZE_MAX, size_t outputs = SIZE_MAX) {
  auto check = [&](const std::vector<TensorDesc>& descs, const char* what, size_t count = SIZE_MAX) {
    for (size_t i = 0; i < descs.size() && i < count; ++i) {
      if (descs[i].present() && descs[i].dtype != DType::Float32) {
        reference::kernel_fail(spec, std::string(what) + " " + std::to_string(i) + " is " +
                                         std::string(dtype_name(descs[i].dtype)) +
                                         ": the CUDA kernel supports float32 only");
      }
    }
  };
  check(spec.inputs, "input", inputs);
  check(spec.outputs, "output", outputs);
}

// The one dtype of kConvGemmDTypes that every present input and output of `spec` has; fails otherwise.
inline DType require_conv_gemm_dtype(const KernelSpec& spec) {
  const DType dtype = spec.inputs.at(0).dtype;
  if (std::find(kConvGemmDTypes.begin(), kConvGemmDTypes.end(), dtype) == kConvGemmDTypes.end())
    reference::kernel_fail(spec, "input 0 is " + std::string(dtype_name(dtype)) +
                                     ": the CUDA kernel supports float32, float16 and bfloat16");
  auto check = [&](const std::vector<TensorDesc>& descs, const char* what) {
    for (size_t i = 0; i < descs.size(); ++i) {
      if (descs[i].present() && descs[i].dtype != dtype) {
        reference::kernel_fail(spec, std::string(what) + " " + std::to_string(i) + " is " +
                                         std::string(dtype_name(descs[i].dtype)) + ", input 0 " +
                                         std::string(dtype_name(dtype)) + ": one element type throughout");
      }
    }
  };
  check(spec.inputs, "input");
  check(spec.outputs, "output");
  return dtype;
}

// Ints for a cuDNN descriptor, or an Error naming the tensor. A zero size becomes 1 (cuDNN refuses
// zero-size descriptors): every kernel skips or zero-fills an empty problem before cuDNN sees it.
inline std::vector<int> require_cudnn_dims(const KernelSpec& spec, const std::vector<int64_t>& sizes,
                                           const std::string& what, size_t min_rank = 4) {
  std::optional<std::vector<int>> dims = cudnn_dims(sizes, min_rank);
  if (!dims) reference::kernel_fail(spec, what + " " + reference::sizes_to_string(sizes) + " does not fit cuDNN's int");
  for (int& d : *dims) d = d == 0 ? 1 : d;
  return *dims;
}

#if ONNXTRAIN_HAVE_CUDNN

// Owned descriptors. Creation and setting need no device; destruction cannot fail in a way worth
// reporting from a destructor.
// cuDNN's data type of a kConvGemmDTypes dtype.
inline cudnnDataType_t cudnn_data_type(DType dtype) {
  return dtype == DType::Float16 ? CUDNN_DATA_HALF : dtype == DType::BFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

class TensorDescriptor {
 public:
  TensorDescriptor() { ONNXTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
  explicit TensorDescriptor(const std::vector<int>& dims, DType dtype = DType::Float32) : TensorDescriptor() {
    set(dims, dtype);
  }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  void set(const std::vector<int>& dims, DType dtype = DType::Float32) {
    set_strided(dims, packed_strides(dims), dtype);
  }
  // A view with other strides (an interior of a larger tensor: conv_padding.h).
  void set_strided(const std::vector<int>& dims, const std::vector<int>& strides, DType dtype) {
    ONNXTRAIN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc_, cudnn_data_type(dtype), static_cast<int>(dims.size()),
                                                     dims.data(), strides.data()));
  }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  explicit FilterDescriptor(const std::vector<int>& dims, DType dtype = DType::Float32) {
    ONNXTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    ONNXTRAIN_CUDNN_CHECK(cudnnSetFilterNdDescriptor(desc_, cudnn_data_type(dtype), CUDNN_TENSOR_NCHW,
                                                     static_cast<int>(dims.size()), dims.data()));
  }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  // `data`: the operands' dtype. The compute type is float32 for all (for float16/bfloat16 data cuDNN's
  // pseudo-half configurations: half operands, float32 accumulation).
  ConvolutionDescriptor(const CudnnWindow& w, int group, DType data = DType::Float32) {
    ONNXTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
    ONNXTRAIN_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(desc_, static_cast<int>(w.pads.size()), w.pads.data(),
                                                          w.strides.data(), w.dilations.data(), CUDNN_CROSS_CORRELATION,
                                                          CUDNN_DATA_FLOAT));
    ONNXTRAIN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc_, group));
    // Half data: tensor cores. Float32: strict (FMA math: no TF32 tensor-core rounding, results within
    // float32 tolerance of the reference kernel) unless --tf32 allows it (math_mode.h; DEFAULT math permits
    // TF32 on Ampere and newer). Find only returns algorithms of this math type.
    const cudnnMathType_t math = is_half(data)  ? CUDNN_TENSOR_OP_MATH
                                 : allow_tf32() ? CUDNN_DEFAULT_MATH
                                                : CUDNN_FMA_MATH;
    ONNXTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, math));
  }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

class PoolingDescriptor {
 public:
  PoolingDescriptor(cudnnPoolingMode_t mode, const CudnnWindow& w) {
    ONNXTRAIN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
    ONNXTRAIN_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(desc_, mode, CUDNN_NOT_PROPAGATE_NAN,
                                                      static_cast<int>(w.kernel.size()), w.kernel.data(), w.pads.data(),
                                                      w.strides.data()));
  }
  ~PoolingDescriptor() { cudnnDestroyPoolingDescriptor(desc_); }
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

class LrnDescriptor {
 public:
  LrnDescriptor(unsigned size, double alpha, double beta, double bias) {
    ONNXTRAIN_CUDNN_CHECK(cudnnCreateLRNDescriptor(&desc_));
    ONNXTRAIN_CUDNN_CHECK(cudnnSetLRNDescriptor(desc_, size, alpha, beta, bias));
  }
  ~LrnDescriptor() { cudnnDestroyLRNDescriptor(desc_); }
  LrnDescriptor(const LrnDescriptor&) = delete;
  LrnDescriptor& operator=(const LrnDescriptor&) = delete;
  cudnnLRNDescriptor_t get() const { return desc_; }

 private:
  cudnnLRNDescriptor_t desc_ = nullptr;
};

#endif  // ONNXTRAIN_HAVE_CUDNN

// Device scratch carved from one workspace() call (a second call may move the first's memory):
//   ScratchLayout s; size_t y = s.add(bytes_y), dx = s.add(bytes_dx);
//   char* base = static_cast<char*>(workspace(stream, s.total()));  // base + y, base + dx
struct ScratchLayout {
  size_t bytes = 0;
  size_t add(size_t size) {
    const size_t offset = bytes;
    bytes += (size + 255) / 256 * 256;  // keep every piece 256-byte aligned
    return offset;
  }
  size_t total() const { return bytes == 0 ? 256 : bytes; }
};

}  // namespace onnxtrain::cuda
