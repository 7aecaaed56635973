// oneDNN kernel of ai.onnxtrain::ActivationGrad(dY, X) (float32): eltwise_backward over the flattened
// tensor with the forward op's algorithm (the mapping of eltwise.cc), taking X as its src. Reciprocal is
// eltwise_pow with alpha 1, beta -1. oneDNN 2.6 has no selu, erf or hardsigmoid (and its clip passes no
// gradient at the bounds, where torch.clamp's does), so Selu, Erf, HardSigmoid and Clip run the "cpu" kernel
// (kernels/cpu/elementwise_activation_grad.cc); empty tensors and anything oneDNN refuses fall back to the reference
// kernel (same device).
#include <optional>

#include "kernels/elementwise_derivatives.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;
using derivatives::Activation;

struct EltwiseParams {
  dnnl::algorithm algorithm;
  float alpha = 0, beta = 0;
};

// The oneDNN algorithm of an activation; nullopt where oneDNN 2.6 has none.
std::optional<EltwiseParams> eltwise_params(Activation a, const derivatives::ActivationParams& p) {
  using A = dnnl::algorithm;
  const float alpha = static_cast<float>(p.alpha);
  // clang-format off
  switch (a) {
    case Activation::Relu: return EltwiseParams{A::eltwise_relu};
    case Activation::LeakyRelu: return EltwiseParams{A::eltwise_relu, alpha};
    case Activation::Elu: return EltwiseParams{A::eltwise_elu, alpha};
    case Activation::Sigmoid: return EltwiseParams{A::eltwise_logistic};
    case Activation::Tanh: return EltwiseParams{A::eltwise_tanh};
    case Activation::Gelu: return EltwiseParams{p.gelu_tanh ? A::eltwise_gelu_tanh : A::eltwise_gelu_erf};
    case Activation::Softplus: return EltwiseParams{A::eltwise_soft_relu};
    case Activation::HardSwish: return EltwiseParams{A::eltwise_hardswish};
    case Activation::Abs: return EltwiseParams{A::eltwise_abs};
    case Activation::Sqrt: return EltwiseParams{A::eltwise_sqrt};
    case Activation::Exp: return EltwiseParams{A::eltwise_exp};
    case Activation::Log: return EltwiseParams{A::eltwise_log};
    case Activation::Reciprocal: return EltwiseParams{A::eltwise_pow, 1.0f, -1.0f};
    case Activation::Selu:
    case Activation::Erf:
    case Activation::Sin:
    case Activation::Cos:
    case Activation::Ceil:
    case Activation::Floor:
    case Activation::Sign:
    case Activation::Mish:
    case Activation::Celu:
    case Activation::HardSigmoid:
    case Activation::Clip: return std::nullopt;
  }
  // clang-format on
  return std::nullopt;
}

std::unique_ptr<Kernel> make_onednn_activation_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = onednn::reference_kernel(spec);  // validates sizes, dtypes and attributes
  if (!all_float32_nonempty(spec)) return fallback;
  const Activation a = *derivatives::activation_from_name(spec.attributes.get_string("activation", ""));
  const std::optional<EltwiseParams> p = eltwise_params(a, derivatives::activation_params(a, spec.attributes));
  const bool second_part = spec.inputs.size() > 2 && spec.inputs[2].present();  // dY2: the "cpu" kernel adds it
  if (!p || second_part) {  // onnxtrain's own vectorised kernel where there is one
                            // (kernels/cpu/elementwise_activation_grad.cc)
    const KernelEntry* cpu =
        KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, "cpu");
    return cpu ? cpu->prepare(spec) : std::move(fallback);
  }
  try {
    const dnnl::memory::desc flat = plain_desc({spec.inputs[1].numel()});
    dnnl::eltwise_forward::desc forward(dnnl::prop_kind::forward_training, p->algorithm, flat, p->alpha, p->beta);
    dnnl::eltwise_forward::primitive_desc hint(forward, cpu_engine());
    dnnl::eltwise_backward::desc desc(p->algorithm, flat, flat, p->alpha, p->beta);
    dnnl::eltwise_backward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine(), hint);
    auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::eltwise_backward(pd));
    kernel->bind_input(DNNL_ARG_DIFF_DST, 0, flat);
    kernel->bind_input(DNNL_ARG_SRC, 1, flat);
    kernel->bind_output(DNNL_ARG_DIFF_SRC, 0, flat);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_eltwise_backward_kernels(KernelRegistry& registry) {
  registry.add(training_entry("ActivationGrad", &make_onednn_activation_grad));
}

}  // namespace onnxtrain
