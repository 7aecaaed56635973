// cuBLAS Gemm and MatMul, float32 (registered with or without cuDNN).
// Gemm: Y = alpha·A'·B' + beta·C as one cublasSgemm on the row-major operands (gemm_call in
// cudnn_params.h swaps them for cuBLAS's column-major view); C is first broadcast into Y (a copy when it
// is already (M,N), else gemm_broadcast.cu's kernel) and cuBLAS adds the product with beta.
// MatMul: numpy broadcasting of the batch dims as planned by plan_matmul: one cublasSgemmStridedBatched per
// run of batches that both operands step through uniformly (stride 0 for a broadcast operand), usually
// one call; B shared by all of A's batches folds them into the rows of one cublasSgemm. 1-D operands are
// (1,K) rows and (K,1) columns. An empty inner dimension gives zeros (or beta·C).
// The cuBLAS handle is the stream's (cuda_context.h) in its default host pointer mode and math mode
// (strict float32, no TF32).
#include <algorithm>

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

class CublasGemm final : public Kernel {
 public:
  CublasGemm(const GemmCall& call, float alpha, float beta, bool has_c, bool c_full, int64_t s0, int64_t s1)
      : call_(call), alpha_(alpha), beta_(beta), has_c_(has_c), c_full_(c_full), s0_(s0), s1_(s1) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const int64_t m = call_.cols, n = call_.rows;
    if (m * n == 0) return;
    DeviceGuard guard(stream);
    cudaStream_t s = native_stream(stream);
    float* y = outputs[0].as<float>();
    const bool use_c = has_c_ && beta_ != 0.0f && inputs.size() > 2 && inputs[2].data;
    if (use_c) {
      const float* c = inputs[2].as<const float>();
      if (c_full_) {
        ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(y, c, static_cast<size_t>(m * n) * 4, cudaMemcpyDeviceToDevice, s));
      } else {
        launch_gemm_broadcast_fill(y, c, m, n, s0_, s1_, s);
      }
    }
    cublasHandle_t handle = cublas_handle(stream);
    if (call_.inner == 0) {  // no products: Y = beta·C or 0
      if (use_c) {
        ONNXTRAIN_CUBLAS_CHECK(cublasSscal(handle, static_cast<int>(m * n), &beta_, y, 1));
      } else {
        ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(m * n) * 4, s));
      }
      return;
    }
    const float beta = use_c ? beta_ : 0.0f;
    ONNXTRAIN_CUBLAS_CHECK(cublasSgemm(
        handle, call_.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, call_.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(call_.rows), static_cast<int>(call_.cols), static_cast<int>(call_.inner), &alpha_,
        inputs[1].as<const float>(), static_cast<int>(call_.ld_first), inputs[0].as<const float>(),
        static_cast<int>(call_.ld_second), &beta, y, static_cast<int>(call_.ld_out)));
  }

 private:
  GemmCall call_;
  float alpha_, beta_;
  bool has_c_, c_full_;
  int64_t s0_, s1_;
};

std::unique_ptr<Kernel> make_gemm(const KernelSpec& spec) {
  validate_with_reference(spec);
  require_all_float32(spec);
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
  std::vector<int64_t> c_strides{0, 0};
  bool c_full = false;
  if (has_c) {
    c_strides = reference::broadcast_strides(spec.inputs[2].sizes, {m, n});
    c_full = spec.inputs[2].numel() == m * n;
  }
  return std::make_unique<CublasGemm>(call, static_cast<float>(spec.attributes.get_float("alpha", 1.0)),
                                      static_cast<float>(spec.attributes.get_float("beta", 1.0)), has_c, c_full,
                                      c_strides[0], c_strides[1]);
}

class CublasMatMul final : public Kernel {
 public:
  explicit CublasMatMul(MatMulPlan plan, int64_t y_numel) : plan_(std::move(plan)), y_numel_(y_numel) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (y_numel_ == 0) return;
    DeviceGuard guard(stream);
    float* y = outputs[0].as<float>();
    if (plan_.k == 0) {
      ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(y_numel_) * 4, native_stream(stream)));
      return;
    }
    cublasHandle_t handle = cublas_handle(stream);
    const float* a = inputs[0].as<const float>();
    const float* b = inputs[1].as<const float>();
    const float one = 1.0f, zero = 0.0f;
    const int m = static_cast<int>(plan_.m), n = static_cast<int>(plan_.n), k = static_cast<int>(plan_.k);
    for (const StridedBatch& c : plan_.calls) {
      // Row-major Y = A·B is column-major Yᵀ = Bᵀ·Aᵀ: B first, leading dimensions n, k, n.
      if (c.count == 1) {
        ONNXTRAIN_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b + c.b_offset, n,
                                           a + c.a_offset, k, &zero, y + c.y_offset, n));
      } else {
        ONNXTRAIN_CUBLAS_CHECK(cublasSgemmStridedBatched(
            handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b + c.b_offset, n, c.b_stride, a + c.a_offset, k,
            c.a_stride, &zero, y + c.y_offset, n, c.y_stride, static_cast<int>(c.count)));
      }
    }
  }

 private:
  MatMulPlan plan_;
  int64_t y_numel_;
};

std::unique_ptr<Kernel> make_matmul(const KernelSpec& spec) {
  validate_with_reference(spec);
  require_all_float32(spec);
  MatMulPlan plan = plan_matmul(spec.inputs[0].sizes, spec.inputs[1].sizes);
  if (!plan.problem.empty()) kernel_fail(spec, plan.problem);
  checked_int(spec, plan.m, plan.fold_rows ? "batch·M" : "M");
  checked_int(spec, plan.n, "N");
  checked_int(spec, plan.k, "K");
  for (const StridedBatch& c : plan.calls) checked_int(spec, c.count, "batch count");
  const int64_t y_numel = spec.outputs[0].numel();
  return std::make_unique<CublasMatMul>(std::move(plan), y_numel);
}

}  // namespace

void register_cuda_gemm_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "Gemm", &make_gemm));
  registry.add(cuda_entry("", "MatMul", &make_matmul));
}

}  // namespace onnxtrain
