// MatMul and Gemm on oneDNN's matmul primitive, over the caller's plain buffers (no reorders).
// MatMul: numpy rules. A 1-D operand becomes a (1,K) row or a (K,1) column and the lower-rank operand
// gets leading 1s (both only relabel the same memory), so the batch dims line up and broadcast where one
// side is 1, which oneDNN's matmul does itself. Gemm: transA/transB are strides of the memory
// descriptors; alpha is an eltwise_linear post-op; C (broadcast from (M,N), (1,N), (M,1) or (1,1)) is the
// matmul's own bias when alpha and beta are 1 (unless oneDNN has only its reference implementation for
// that broadcast), else a binary_add post-op when beta is 1, else it is copied into Y and added by a sum
// post-op with scale beta. The argument list is built at prepare; a run only sets the data handles.
// float32, and bfloat16 where the CPU has native bfloat16 (onednn::native_bf16; accumulation in float32, the
// result rounded once; C then also bfloat16, but not with the copy into Y, which is float32 code).
// FusedMatMul (graph/ops/training/fused_matmul.cc) is MatMul with Gemm's transA/transB as strides, over
// batches too, Gemm's alpha (the same post-op) and a (N) bias.
// Variants oneDNN has no implementation for, and zero-size tensors, use the reference kernel.
// The scratchpad is in the running thread's arena (kernels/scratch_arena.h), the data handles are the
// kernel's own: one kernel object runs on one thread at a time.
#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/cpu/skinny_gemm.h"
#include "kernels/onednn/conv_operands.h"
#include "kernels/onednn/deferred_products.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain {
namespace {

using dnnl::memory;

memory::desc strided_desc(const memory::dims& dims, const memory::dims& strides, DType dtype) {
  return memory::desc(dims, onednn::data_type_of(dtype), strides);
}

// Row-major strides of `dims`, with the last two swapped when `transposed` (the buffer holds the
// transpose of the matrix that `dims` describes).
memory::dims matrix_strides(const memory::dims& dims, bool transposed) {
  const size_t r = dims.size();
  memory::dims stored = dims;
  if (transposed) std::swap(stored[r - 1], stored[r - 2]);
  memory::dims strides(r, 1);
  for (size_t i = r - 1; i-- > 0;) strides[i] = strides[i + 1] * stored[i + 1];
  if (transposed) std::swap(strides[r - 1], strides[r - 2]);
  return strides;
}

using onednn::execute;

// Whether oneDNN picked its slow reference implementation ("ref:any" and the like).
bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

class OnednnMatMul final : public Kernel, public onednn::ReportsImplementation {
 public:
  // `c_desc`: the (broadcast) desc of Gemm's C, or none. Post-ops compute alpha·AB + beta·C.
  OnednnMatMul(const KernelSpec& spec, const memory::desc& a, const memory::desc& b, const memory::desc& y,
               double alpha, double beta, const std::optional<memory::desc>& c_desc)
      : spec_(spec), a_desc_(a), b_desc_(b), y_desc_(y) {
    // Y = AB alone (a MatMul, or a Gemm's weight gradient) can also be added into Y: sums_output.
    sums_ =
        !c_desc && alpha == 1.0 && a.data_type() == memory::data_type::f32 && y.data_type() == memory::data_type::f32;
    dnnl::engine& engine = onednn::cpu_engine();
    a_ = memory(a, engine, nullptr);
    b_ = memory(b, engine, nullptr);
    y_ = memory(y, engine, nullptr);
    std::optional<dnnl::matmul::primitive_desc> pd;
    if (c_desc && alpha == 1.0 && beta == 1.0) {  // Y = AB + C: C is the bias, broadcast by oneDNN
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      try {
        dnnl::matmul::primitive_desc bias_pd(dnnl::matmul::desc(a, b, *c_desc, y), attr, engine);
        if (!is_reference_impl(bias_pd)) pd = bias_pd;
      } catch (const dnnl::error& e) {
        if (e.status != dnnl_unimplemented) throw;
      }
      if (pd) {
        c_ = memory(*c_desc, engine, nullptr);
        c_arg_ = DNNL_ARG_BIAS;
      }
    }
    if (!pd) {
      dnnl::post_ops ops;
      const auto linear = [&](double scale) {
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, static_cast<float>(scale), 0.0f);
      };
      if (alpha != 1.0) linear(alpha);
      if (c_desc && beta == 1.0) {  // Y = alpha·AB + C: C is a binary post-op operand, broadcast by oneDNN
        c_arg_ = DNNL_ARG_ATTR_MULTIPLE_POST_OP(ops.len()) | DNNL_ARG_SRC_1;
        ops.append_binary(dnnl::algorithm::binary_add, *c_desc);
        c_ = memory(*c_desc, engine, nullptr);
      } else if (c_desc) {  // Y = alpha·AB + beta·Y, Y first filled with C broadcast (a sum post-op)
        ops.append_sum(static_cast<float>(beta));
        const memory::dims& c = c_desc->dims();
        c_fill_ = {c[0], c[1], c[0] == 1 ? 0 : c[1], c[1] == 1 ? 0 : 1};
        y_cols_ = y.dims()[1];
        y_rows_ = y.dims()[0];
      }
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      attr.set_post_ops(ops);
      pd.emplace(dnnl::matmul::desc(a, b, y), attr, engine);
    }
    scratchpad_ = memory(pd->scratchpad_desc(), engine, nullptr);
    matmul_ = dnnl::matmul(*pd);
    implementation_ = pd->impl_info_str();
    args_ = {{DNNL_ARG_SRC, a_.get()},
             {DNNL_ARG_WEIGHTS, b_.get()},
             {DNNL_ARG_DST, y_.get()},
             {DNNL_ARG_SCRATCHPAD, scratchpad_.get()}};
    if (c_arg_ >= 0) args_.push_back({c_arg_, c_.get()});
  }

  // A Gemm's weight gradient Y (M, N) = Aᵀ·B, A (K, M) and B (K, N) row-major, float32: where the stream
  // defers sums and Y is larger than the K rows, its runs are staged and summed as one product
  // (deferred_products.h).
  void defer_as_transposed_product(int64_t k, int64_t m, int64_t n) {
    if (sums_ && worth_deferring(m * n, k * (m + n))) deferred_ = {k, m, n};
  }

  std::string library_implementation() const override { return implementation_; }
  // Y summed over runs (a pipeline's micro-batch gradients): after the first, Y += AB by a sum post-op.
  bool sums_output(size_t index) const override { return index == 0 && sums_; }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    onednn::checked(spec_, "run", [&] {
      a_.set_data_handle(inputs[0].data);
      b_.set_data_handle(inputs[1].data);
      y_.set_data_handle(outputs[0].data);
      if (!c_fill_.empty()) fill_with_c(inputs[2].as<const float>(), outputs[0].as<float>());
      if (c_arg_ >= 0) c_.set_data_handle(inputs[2].data);
      Stream::OutputSum* sum = sums_ ? stream.output_sum(outputs[0].data) : nullptr;
      if (sum && deferred_.k > 0 && stream.defers_sums()) {
        onednn::DeferredTransposedProduct::stage(*sum, staging_, inputs[0].as<const float>(),
                                                 inputs[1].as<const float>(), deferred_.k, deferred_.m, deferred_.n);
        return;
      }
      const bool adds = sum && !sum->first;
      if (adds && !adding_) prepare_adding();
      dnnl::stream& onednn_stream = onednn::cpu_stream();
      ScratchArena::Lease lease;
      memory& scratchpad = adds ? adding_scratchpad_ : scratchpad_;
      scratchpad.set_data_handle(lease.take(scratchpad.get_desc().get_size()));
      execute(adds ? *adding_ : matmul_, onednn_stream, adds ? adding_args_ : args_);
      onednn_stream.wait();
    });
  }

 private:
  void fill_with_c(const float* c, float* y) const {
    for (int64_t i = 0; i < y_rows_; ++i)
      for (int64_t j = 0; j < y_cols_; ++j) y[i * y_cols_ + j] = c[i * c_fill_[2] + j * c_fill_[3]];
  }

  // The Y += AB primitive, made at the first run that adds (most matmuls never do).
  void prepare_adding() {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(ops);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc_, b_desc_, y_desc_), attr, onednn::cpu_engine());
    adding_.emplace(pd);
    adding_scratchpad_ = memory(pd.scratchpad_desc(), onednn::cpu_engine(), nullptr);
    adding_args_ = {{DNNL_ARG_SRC, a_.get()},
                    {DNNL_ARG_WEIGHTS, b_.get()},
                    {DNNL_ARG_DST, y_.get()},
                    {DNNL_ARG_SCRATCHPAD, adding_scratchpad_.get()}};
  }

  KernelSpec spec_;
  memory::desc a_desc_, b_desc_, y_desc_;
  bool sums_ = false;
  std::optional<dnnl::matmul> adding_;
  memory adding_scratchpad_;
  std::vector<dnnl_exec_arg_t> adding_args_;
  std::string implementation_;
  int c_arg_ = -1;               // the argument C is passed as (bias or binary post-op operand), or -1
  std::vector<int64_t> c_fill_;  // C rows, cols, row stride, col stride (0 = broadcast); empty: no fill
  int64_t y_rows_ = 0, y_cols_ = 0;
  struct {
    int64_t k = 0, m = 0, n = 0;  // defer_as_transposed_product's sizes; k 0: never deferred
  } deferred_;
  std::shared_ptr<onednn::DeferredTransposedProduct> staging_;  // reused by the next sum once finished
  memory a_, b_, y_, c_, scratchpad_;
  dnnl::matmul matmul_;
  std::vector<dnnl_exec_arg_t> args_;  // the primitive's arguments, over the memory objects above
};

// Gemm of a micro-batch of at most 8 rows against a weight (kernels/cpu/skinny_gemm.h), whose product
// oneDNN's matmul would run after copying the weight into its blocked layout: the forward X·Wᵀ and dY·W.
// Float32, alpha 1, and C only as the forward's bias ((N) or (1, N), beta 1); sums its output over
// micro-batches in place.
class SkinnyGemm final : public Kernel, public onednn::ReportsImplementation {
 public:
  enum class Form { nt, nn };
  SkinnyGemm(Form form, int64_t m, int64_t n, int64_t k, bool bias) : form_(form), m_(m), n_(n), k_(k), bias_(bias) {}

  std::string library_implementation() const override {
    return std::string("skinny gemm (") + (form_ == Form::nt ? "nt" : "nn") + ")";
  }
  bool sums_output(size_t index) const override { return index == 0 && !bias_; }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* a = inputs[0].as<const float>();
    const float* b = inputs[1].as<const float>();
    float* y = outputs[0].as<float>();
    const Stream::OutputSum* sum = bias_ ? nullptr : stream.output_sum(y);
    const bool add = sum && !sum->first;
    if (form_ == Form::nt) {  // Y (M, N) = A (M, K) · B (N, K)ᵀ [+ C]
      cpu::skinny_gemm_nt(m_, n_, k_, a, b, bias_ ? inputs[2].as<const float>() : nullptr, y, add);
    } else {  // Y (M, N) = A (M, K) · B (K, N)
      cpu::skinny_gemm_nn(m_, k_, n_, a, b, y, add);
    }
  }

 private:
  Form form_;
  int64_t m_, n_, k_;
  bool bias_;
};

// The skinny kernel for a float32 Gemm it covers, else null.
std::unique_ptr<Kernel> skinny_gemm_for(const KernelSpec& spec, int64_t m, int64_t n, int64_t k) {
  const Attributes& at = spec.attributes;
  if (spec.inputs[0].dtype != DType::Float32 || at.get_float("alpha", 1.0) != 1.0 || !cpu::has_skinny_gemm())
    return nullptr;
  const bool has_c = spec.inputs.size() > 2 && spec.inputs[2].present() && at.get_float("beta", 1.0) != 0.0;
  bool bias = false;
  if (has_c) {
    const std::vector<int64_t>& c = spec.inputs[2].sizes;
    const bool per_column = (c.size() == 1 && c[0] == n) || (c.size() == 2 && c[0] == 1 && c[1] == n);
    if (!per_column || at.get_float("beta", 1.0) != 1.0) return nullptr;
    bias = true;
  }
  const bool trans_a = at.get_int("transA", 0) != 0, trans_b = at.get_int("transB", 0) != 0;
  constexpr int64_t kLeastWork = 1024;  // elements of the weight: below, neither kernel matters
  if (trans_a) return nullptr;
  if (trans_b && m <= cpu::kSkinnyRows && n * k >= kLeastWork)
    return std::make_unique<SkinnyGemm>(SkinnyGemm::Form::nt, m, n, k, bias);
  if (bias) return nullptr;
  if (m <= cpu::kSkinnyRows && n * k >= kLeastWork)
    return std::make_unique<SkinnyGemm>(SkinnyGemm::Form::nn, m, n, k, false);
  return nullptr;
}

bool any_empty(const KernelSpec& spec) {
  for (const TensorDesc& d : spec.inputs)
    if (d.present() && d.numel() == 0) return true;
  return spec.outputs[0].numel() == 0;
}

// Builds the oneDNN kernel; the reference one when oneDNN has no implementation for the variant.
template <typename Build>
std::unique_ptr<Kernel> onednn_or_reference(const KernelSpec& spec, std::unique_ptr<Kernel> reference, Build&& build) {
  try {
    return build();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return reference;
    return onednn::checked(spec, "prepare", [&]() -> std::unique_ptr<Kernel> { throw; });
  }
}

// A batch of row-major matrices (..., M, K) as one (rows, K) matrix. Multiplied by one matrix B, the batch
// is one product: oneDNN's batched matmul would take the (1, K, N) B as a batch of one and, where B is read
// transposed, copy it for every entry of the batch (torchvision's ViT, 65x32x256 by a transposed 256x768
// weight: 7.0 ms against 5.8 ms as one 2080x256 product with the bias, one thread, ONEDNN_VERBOSE).
std::vector<int64_t> rows_of(const std::vector<int64_t>& dims) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  return {rows, dims.back()};
}

std::unique_ptr<Kernel> make_matmul(const KernelSpec& spec) {
  // The reference prepare checks the sizes, so both implementations reject the same specs.
  std::unique_ptr<Kernel> reference = onednn::reference_kernel(spec);
  std::vector<int64_t> a = spec.inputs[0].sizes, b = spec.inputs[1].sizes;
  const DType dtype = spec.inputs[0].dtype;
  if (!onednn::takes_dtype(dtype) || any_empty(spec)) return reference;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const size_t rank = std::max(a.size(), b.size());
  if (rank > DNNL_MAX_NDIMS) return reference;
  a.insert(a.begin(), rank - a.size(), 1);
  b.insert(b.begin(), rank - b.size(), 1);
  std::vector<int64_t> y(rank);
  for (size_t i = 0; i + 2 < rank; ++i) y[i] = std::max(a[i], b[i]);
  y[rank - 2] = a[rank - 2];
  y[rank - 1] = b[rank - 1];
  return onednn_or_reference(spec, std::move(reference), [&] {
    return std::make_unique<OnednnMatMul>(spec, onednn::plain_desc(a, dtype), onednn::plain_desc(b, dtype),
                                          onednn::plain_desc(y, dtype), 1.0, 1.0, std::nullopt);
  });
}

// FusedMatMul: MatMul's product with each operand's flag as the strides of its desc, alpha as Gemm's, and
// C (N) as the bias, broadcast over the rows.
std::unique_ptr<Kernel> make_fused_matmul(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = onednn::reference_kernel(spec);
  std::vector<int64_t> a = spec.inputs[0].sizes, b = spec.inputs[1].sizes;
  const DType dtype = spec.inputs[0].dtype;
  const std::vector<int64_t>& y = spec.outputs[0].sizes;  // checked by the reference prepare
  if (!onednn::takes_dtype(dtype) || any_empty(spec) || y.size() > DNNL_MAX_NDIMS) return reference;
  const bool trans_a = spec.attributes.get_int("transA", 0) != 0, trans_b = spec.attributes.get_int("transB", 0) != 0;
  std::vector<int64_t> y_dims = y;
  if (b.size() == 2 && !trans_a) {  // rows against a matrix: one product over all rows (see rows_of)
    a = rows_of(a);
    y_dims = rows_of(y);
  }
  // The dims of the matrices as the product reads them, with leading 1s up to Y's rank.
  const auto product_dims = [&](std::vector<int64_t> dims, bool transposed) {
    if (transposed) std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
    dims.insert(dims.begin(), y_dims.size() - dims.size(), 1);
    return dims;
  };
  a = product_dims(a, trans_a);
  b = product_dims(b, trans_b);
  // float32_output: Y and C are float32 over half A and B (the reference prepare checked them).
  const DType y_dtype = spec.outputs[0].dtype;
  std::optional<memory::desc> c_desc;
  if (spec.inputs.size() > 2 && spec.inputs[2].present()) {
    std::vector<int64_t> c(y_dims.size(), 1);
    c.back() = y_dims.back();
    c_desc = onednn::plain_desc(c, y_dtype);
  }
  return onednn_or_reference(spec, std::move(reference), [&] {
    return std::make_unique<OnednnMatMul>(
        spec, strided_desc(a, matrix_strides(a, trans_a), dtype), strided_desc(b, matrix_strides(b, trans_b), dtype),
        onednn::plain_desc(y_dims, y_dtype), spec.attributes.get_float("alpha", 1.0), 1.0, c_desc);
  });
}

std::unique_ptr<Kernel> make_gemm(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = onednn::reference_kernel(spec);
  const DType dtype = spec.inputs[0].dtype;
  if (!onednn::takes_dtype(dtype) || any_empty(spec)) return reference;
  const std::vector<int64_t>& y = spec.outputs[0].sizes;  // (M,N), checked by the reference prepare
  const int64_t m = y[0], n = y[1],
                k = spec.attributes.get_int("transA", 0) ? spec.inputs[0].sizes[0] : spec.inputs[0].sizes[1];
  if (std::unique_ptr<Kernel> skinny = skinny_gemm_for(spec, m, n, k)) return skinny;
  const double alpha = spec.attributes.get_float("alpha", 1.0);
  const double beta = spec.attributes.get_float("beta", 1.0);
  std::optional<memory::desc> c_desc;
  if (spec.inputs.size() > 2 && spec.inputs[2].present() && beta != 0.0) {
    if (beta != 1.0 && dtype != DType::Float32) return reference;  // fill_with_c copies floats
    std::vector<int64_t> c = spec.inputs[2].sizes;                 // broadcasts onto (M,N): give it rank 2
    c.insert(c.begin(), 2 - c.size(), 1);
    c_desc = onednn::plain_desc(c, dtype);
  }
  const memory::dims a_dims{m, k}, b_dims{k, n};
  const bool trans_a = spec.attributes.get_int("transA", 0) != 0, trans_b = spec.attributes.get_int("transB", 0) != 0;
  return onednn_or_reference(spec, std::move(reference), [&] {
    auto kernel = std::make_unique<OnednnMatMul>(spec, strided_desc(a_dims, matrix_strides(a_dims, trans_a), dtype),
                                                 strided_desc(b_dims, matrix_strides(b_dims, trans_b), dtype),
                                                 onednn::plain_desc(y, dtype), alpha, beta, c_desc);
    if (trans_a && !trans_b && dtype == DType::Float32) kernel->defer_as_transposed_product(k, m, n);
    return kernel;
  });
}

KernelEntry onednn_entry(const char* op, KernelFactory factory) {
  return {.domain = "",
          .op_type = op,
          .device = DeviceKind::Cpu,
          .dtypes = {DType::Float32, DType::BFloat16},
          .implementation = "onednn",
          .factory = factory};
}

}  // namespace

void register_onednn_matmul_kernels(KernelRegistry& registry) {
  registry.add(onednn_entry("MatMul", &make_matmul));
  registry.add(onednn_entry("Gemm", &make_gemm));
  KernelEntry fused = onednn_entry("FusedMatMul", &make_fused_matmul);
  fused.domain = kTrainingDomain;
  registry.add(fused);
}

}  // namespace onnxtrain
