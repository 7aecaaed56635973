// cuBLAS Gemm and MatMul, float32, and float16/bfloat16 with float32 accumulation (cublasGemmEx,
// CUBLAS_COMPUTE_32F: what the autocast pass of --precision runs; a half Gemm takes no C, which the pass
// adds in float32). Registered with or without cuDNN.
// Gemm: Y = alpha·A'·B' + beta·C as one cublasSgemm on the row-major operands (gemm_call in
// cudnn_params.h swaps them for cuBLAS's column-major view); C is first broadcast into Y (a copy when it
// is already (M,N), else gemm_broadcast.cu's kernel) and cuBLAS adds the product with beta.
// MatMul: numpy broadcasting of the batch dims as planned by plan_matmul: one cublasSgemmStridedBatched per
// run of batches that both operands step through uniformly (stride 0 for a broadcast operand), usually
// one call; B shared by all of A's batches folds them into the rows of one cublasSgemm. 1-D operands are
// (1,K) rows and (K,1) columns. An empty inner dimension gives zeros (or beta·C).
// The cuBLAS handle is the stream's (cuda_context.h) in its default host pointer mode and math mode
// (strict float32 unless --tf32).
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_common.h"

namespace onnxtrain {
namespace cuda {
// gemm_broadcast.cu: y[i, j] = c[i·s0 + j·s1] over (m, n), C broadcast onto Y, enqueued on `stream`.
void launch_gemm_broadcast_fill(float* y, const float* c, int64_t m, int64_t n, int64_t s0, int64_t s1,
                                cudaStream_t stream);
}  // namespace cuda
namespace {

using namespace cuda;
using reference::kernel_fail;

int checked_int(const KernelSpec& spec, int64_t v, const char* what) {
  if (!fits_int(v)) kernel_fail(spec, std::string(what) + " = " + std::to_string(v) + " does not fit cuBLAS's int");
  return static_cast<int>(v);
}

cudaDataType_t cublas_data_type(DType dtype) {
  return dtype == DType::Float16 ? CUDA_R_16F : dtype == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// `p` advanced by `elements` elements of `dtype`.
template <typename P>
P* advance(P* p, int64_t elements, DType dtype) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P*>(reinterpret_cast<Byte*>(p) + elements * static_cast<int64_t>(dtype_size(dtype)));
}

// Column-major C = alpha·op(A)·op(B) + beta·C (cuBLAS's argument order): float32 through cublasSgemm (its
// math mode decides TF32), float16/bfloat16 through cublasGemmEx accumulating in float32.
void gemm(cublasHandle_t handle, DType dtype, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const float* alpha, const void* a, int lda, const void* b, int ldb, const float* beta, void* c, int ldc) {
  if (dtype == DType::Float32) {
    ONNXTRAIN_CUBLAS_CHECK(cublasSgemm(handle, ta, tb, m, n, k, alpha, static_cast<const float*>(a), lda,
                                       static_cast<const float*>(b), ldb, beta, static_cast<float*>(c), ldc));
    return;
  }
  const cudaDataType_t type = cublas_data_type(dtype);
  ONNXTRAIN_CUBLAS_CHECK(cublasGemmEx(handle, ta, tb, m, n, k, alpha, a, type, lda, b, type, ldb, beta, c, type, ldc,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// `count` products as gemm, operands advancing by the given element strides.
void gemm_strided_batched(cublasHandle_t handle, DType dtype, int m, int n, int k, const void* a, int lda,
                          int64_t a_stride, const void* b, int ldb, int64_t b_stride, void* c, int ldc,
                          int64_t c_stride, int count) {
  const float one = 1.0f, zero = 0.0f;
  if (dtype == DType::Float32) {
    ONNXTRAIN_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, static_cast<const float*>(a), lda, a_stride,
        static_cast<const float*>(b), ldb, b_stride, &zero, static_cast<float*>(c), ldc, c_stride, count));
    return;
  }
  const cudaDataType_t type = cublas_data_type(dtype);
  ONNXTRAIN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, type, lda,
                                                    a_stride, b, type, ldb, b_stride, &zero, c, type, ldc, c_stride,
                                                    count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

class CublasGemm final : public Kernel {
 public:
  CublasGemm(const GemmCall& call, float alpha, float beta, bool has_c, bool c_full, int64_t s0, int64_t s1,
             DType dtype)
      : call_(call), alpha_(alpha), beta_(beta), has_c_(has_c), c_full_(c_full), s0_(s0), s1_(s1), dtype_(dtype) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const int64_t m = call_.cols, n = call_.rows;
    if (m * n == 0) return;
    DeviceGuard guard(stream);
    cudaStream_t s = native_stream(stream);
    void* y = outputs[0].data;
    // C only in float32 (make_gemm refuses a half C).
    const bool use_c = has_c_ && beta_ != 0.0f && inputs.size() > 2 && inputs[2].data;
    if (use_c) {
      const float* c = inputs[2].as<const float>();
      if (c_full_) {
        ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(y, c, static_cast<size_t>(m * n) * 4, cudaMemcpyDeviceToDevice, s));
      } else {
        launch_gemm_broadcast_fill(static_cast<float*>(y), c, m, n, s0_, s1_, s);
      }
    }
    cublasHandle_t handle = cublas_handle(stream);
    if (call_.inner == 0) {  // no products: Y = beta·C or 0
      if (use_c) {
        ONNXTRAIN_CUBLAS_CHECK(cublasSscal(handle, static_cast<int>(m * n), &beta_, static_cast<float*>(y), 1));
      } else {
        ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(m * n) * dtype_size(dtype_), s));
      }
      return;
    }
    const float beta = use_c ? beta_ : 0.0f;
    gemm(handle, dtype_, call_.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, call_.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
         static_cast<int>(call_.rows), static_cast<int>(call_.cols), static_cast<int>(call_.inner), &alpha_,
         inputs[1].data, static_cast<int>(call_.ld_first), inputs[0].data, static_cast<int>(call_.ld_second), &beta, y,
         static_cast<int>(call_.ld_out));
  }

 private:
  GemmCall call_;
  float alpha_, beta_;
  bool has_c_, c_full_;
  int64_t s0_, s1_;
  DType dtype_;
};

std::unique_ptr<Kernel> make_gemm(const KernelSpec& spec) {
  validate_with_reference(spec);
  const DType dtype = require_conv_gemm_dtype(spec);
  const std::vector<int64_t>& a = spec.inputs[0].sizes;
  const std::vector<int64_t>& b = spec.inputs[1].sizes;
  const bool trans_a = spec.attributes.get_int("transA", 0) != 0;
  const bool trans_b = spec.attributes.get_int("transB", 0) != 0;
  const int64_t m = trans_a ? a[1] : a[0], k = trans_a ? a[0] : a[1], n = trans_b ? b[0] : b[1];
  checked_int(spec, m, "M");
  checked_int(spec, n, "N");
  checked_int(spec, k, "K");
  checked_int(spec, m * n, "M·N");
  const GemmCall call = gemm_call(m, n, k, trans_a, trans_b);
  const bool has_c = spec.inputs.size() > 2 && spec.inputs[2].present();
  if (has_c && is_half(dtype)) {
    kernel_fail(spec, "C in " + std::string(dtype_name(dtype)) +
                          " is not supported by the CUDA kernel (the autocast pass adds Gemm's bias in float32)");
  }
  std::vector<int64_t> c_strides{0, 0};
  bool c_full = false;
  if (has_c) {
    c_strides = reference::broadcast_strides(spec.inputs[2].sizes, {m, n});
    c_full = spec.inputs[2].numel() == m * n;
  }
  return std::make_unique<CublasGemm>(call, static_cast<float>(spec.attributes.get_float("alpha", 1.0)),
                                      static_cast<float>(spec.attributes.get_float("beta", 1.0)), has_c, c_full,
                                      c_strides[0], c_strides[1], dtype);
}

class CublasMatMul final : public Kernel {
 public:
  CublasMatMul(MatMulPlan plan, int64_t y_numel, DType dtype)
      : plan_(std::move(plan)), y_numel_(y_numel), dtype_(dtype) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (y_numel_ == 0) return;
    DeviceGuard guard(stream);
    void* y = outputs[0].data;
    if (plan_.k == 0) {
      const size_t bytes = static_cast<size_t>(y_numel_) * dtype_size(dtype_);
      ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, native_stream(stream)));
      return;
    }
    cublasHandle_t handle = cublas_handle(stream);
    const void* a = inputs[0].data;
    const void* b = inputs[1].data;
    const float one = 1.0f, zero = 0.0f;
    const int m = static_cast<int>(plan_.m), n = static_cast<int>(plan_.n), k = static_cast<int>(plan_.k);
    for (const StridedBatch& c : plan_.calls) {
      // Row-major Y = A·B is column-major Yᵀ = Bᵀ·Aᵀ: B first, leading dimensions n, k, n.
      const void* first = advance(b, c.b_offset, dtype_);
      const void* second = advance(a, c.a_offset, dtype_);
      void* out = advance(y, c.y_offset, dtype_);
      if (c.count == 1) {
        gemm(handle, dtype_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, first, n, second, k, &zero, out, n);
      } else {
        gemm_strided_batched(handle, dtype_, n, m, k, first, n, c.b_stride, second, k, c.a_stride, out, n, c.y_stride,
                             static_cast<int>(c.count));
      }
    }
  }

 private:
  MatMulPlan plan_;
  int64_t y_numel_;
  DType dtype_;
};

std::unique_ptr<Kernel> make_matmul(const KernelSpec& spec) {
  validate_with_reference(spec);
  const DType dtype = require_conv_gemm_dtype(spec);
  MatMulPlan plan = plan_matmul(spec.inputs[0].sizes, spec.inputs[1].sizes);
  if (!plan.problem.empty()) kernel_fail(spec, plan.problem);
  checked_int(spec, plan.m, plan.fold_rows ? "batch·M" : "M");
  checked_int(spec, plan.n, "N");
  checked_int(spec, plan.k, "K");
  for (const StridedBatch& c : plan.calls) checked_int(spec, c.count, "batch count");
  const int64_t y_numel = spec.outputs[0].numel();
  return std::make_unique<CublasMatMul>(std::move(plan), y_numel, dtype);
}

}  // namespace

void register_cuda_gemm_kernels(KernelRegistry& registry) {
  registry.add(cuda_kernel_entry("", "Gemm", kConvGemmDTypes, &make_gemm));
  registry.add(cuda_kernel_entry("", "MatMul", kConvGemmDTypes, &make_matmul));
}

}  // namespace onnxtrain
