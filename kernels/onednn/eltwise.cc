// oneDNN eltwise (eltwise_forward, float32) over the flattened tensor: Relu, LeakyRelu, Elu, Sigmoid
// (logistic), Tanh, Sqrt, Exp, Abs, Gelu (erf and tanh), HardSwish and Softplus (soft_relu). Clip is the
// "cpu" kernel's (kernels/cpu/elementwise_unary.cc: its bounds are runtime inputs). oneDNN's vectorised exp/tanh/erf
// are approximations, not bit for bit: Gelu's tails are off by ~1e-7 absolute. Log is not here: 2.6's eltwise_log is
// off by ~1.5e-6 absolute near 1 (log(1) = -1e-6), outside the ONNX node tests' atol. Falls back to the reference
// kernel (same device) for: empty tensors and anything oneDNN refuses. oneDNN 2.6 has no hardsigmoid, so HardSigmoid is
// not here.
#include <cmath>

#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

struct EltwiseParams {
  dnnl::algorithm algorithm;
  float alpha = 0, beta = 0;
};

std::unique_ptr<Kernel> make_eltwise_kernel(const KernelSpec& spec, const EltwiseParams& p,
                                            std::unique_ptr<Kernel> fallback) {
  if (!all_float32_nonempty(spec)) return fallback;
  try {
    const dnnl::memory::desc flat = plain_desc({spec.inputs[0].numel()});
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, p.algorithm, flat, p.alpha, p.beta);
    dnnl::eltwise_forward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine());
    auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::eltwise_forward(pd));
    kernel->bind_input(DNNL_ARG_SRC, 0, flat);
    kernel->bind_output(DNNL_ARG_DST, 0, flat);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

// An eltwise op whose parameters come from the attributes by `params(spec)`.
template <EltwiseParams (*params)(const KernelSpec&)>
std::unique_ptr<Kernel> make_eltwise(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates sizes, dtypes and attributes
  return make_eltwise_kernel(spec, params(spec), std::move(fallback));
}

float attr(const KernelSpec& spec, const char* name, double fallback) {
  return static_cast<float>(spec.attributes.get_float(name, fallback));
}

using A = dnnl::algorithm;
EltwiseParams relu(const KernelSpec&) { return {A::eltwise_relu}; }
EltwiseParams leaky_relu(const KernelSpec& s) { return {A::eltwise_relu, attr(s, "alpha", 0.01)}; }
EltwiseParams elu(const KernelSpec& s) { return {A::eltwise_elu, attr(s, "alpha", 1.0)}; }
EltwiseParams sigmoid(const KernelSpec&) { return {A::eltwise_logistic}; }
EltwiseParams tanh_(const KernelSpec&) { return {A::eltwise_tanh}; }
EltwiseParams sqrt_(const KernelSpec&) { return {A::eltwise_sqrt}; }
EltwiseParams exp_(const KernelSpec&) { return {A::eltwise_exp}; }
EltwiseParams abs_(const KernelSpec&) { return {A::eltwise_abs}; }
EltwiseParams hard_swish(const KernelSpec&) { return {A::eltwise_hardswish}; }
EltwiseParams softplus(const KernelSpec&) { return {A::eltwise_soft_relu}; }
EltwiseParams gelu(const KernelSpec& s) {
  return {s.attributes.get_string("approximate", "none") == "tanh" ? A::eltwise_gelu_tanh : A::eltwise_gelu_erf};
}

}  // namespace

void register_onednn_eltwise_kernels(KernelRegistry& registry) {
  registry.add(onednn_entry("Relu", &make_eltwise<relu>));
  registry.add(onednn_entry("LeakyRelu", &make_eltwise<leaky_relu>));
  registry.add(onednn_entry("Elu", &make_eltwise<elu>));
  registry.add(onednn_entry("Sigmoid", &make_eltwise<sigmoid>));
  registry.add(onednn_entry("Tanh", &make_eltwise<tanh_>));
  registry.add(onednn_entry("Sqrt", &make_eltwise<sqrt_>));
  registry.add(onednn_entry("Exp", &make_eltwise<exp_>));
  registry.add(onednn_entry("Abs", &make_eltwise<abs_>));
  registry.add(onednn_entry("Gelu", &make_eltwise<gelu>));
  registry.add(onednn_entry("HardSwish", &make_eltwise<hard_swish>));
  registry.add(onednn_entry("Softplus", &make_eltwise<softplus>));
}

}  // namespace onnxtrain
