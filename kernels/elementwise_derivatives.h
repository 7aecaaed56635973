// The per-element derivatives of the activations and unary math ops, written once for every backend:
// dx = dy * f'(x) as small functors over the element type T, callable from host code and (compiled by
// nvcc) from CUDA kernels. The reference kernel of ai.onnxtrain::ActivationGrad runs them in plain loops;
// a CUDA kernel instantiates the same functors. Semantics follow PyTorch's autograd at the kinks
// (Relu'(0) = 0, |x|'(0) = 0; HardSigmoid passes its slope only strictly inside its ramp, HardSwish on
// [-3, 3]).
//
//   const Activation a = activation_from_name("LeakyRelu").value();
//   with_activation_grad<float>(a, activation_params(a, spec.attributes),
//                               [&](auto grad) { for (i...) dx[i] = grad(dy[i], x[i]); });
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define ONNXTRAIN_HOST_DEVICE __host__ __device__
#else
#define ONNXTRAIN_HOST_DEVICE
#endif

namespace onnxtrain::derivatives {

// clang-format off
// The forward ops ActivationGrad differentiates (its `activation` attribute names one of them).
enum class Activation {
  Relu, LeakyRelu, Elu, Selu, Sigmoid, Tanh, Gelu, Erf, Softplus, HardSigmoid, HardSwish,
  Abs, Sqrt, Exp, Log, Reciprocal, Sin, Cos, Ceil, Floor, Clip, Sign, Mish, Celu,
};

inline constexpr struct {
  const char* name;
  Activation activation;
} kActivationNames[] = {
    {"Relu", Activation::Relu}, {"LeakyRelu", Activation::LeakyRelu}, {"Elu", Activation::Elu},
    {"Selu", Activation::Selu}, {"Sigmoid", Activation::Sigmoid}, {"Tanh", Activation::Tanh},
    {"Gelu", Activation::Gelu}, {"Erf", Activation::Erf}, {"Softplus", Activation::Softplus},
    {"HardSigmoid", Activation::HardSigmoid}, {"HardSwish", Activation::HardSwish}, {"Abs", Activation::Abs},
    {"Sqrt", Activation::Sqrt}, {"Exp", Activation::Exp}, {"Log", Activation::Log},
    {"Reciprocal", Activation::Reciprocal}, {"Sin", Activation::Sin}, {"Cos", Activation::Cos},
    {"Ceil", Activation::Ceil}, {"Floor", Activation::Floor}, {"Clip", Activation::Clip},
    {"Sign", Activation::Sign}, {"Mish", Activation::Mish}, {"Celu", Activation::Celu},
};
// clang-format on

inline std::optional<Activation> activation_from_name(std::string_view name) {
  for (const auto& entry : kActivationNames)
    if (name == entry.name) return entry.activation;
  return std::nullopt;
}

// The forward attributes the derivatives need; unset ones take ONNX's defaults for the op.
struct ActivationParams {
  double alpha = 0;
  double beta = 0;
  double gamma = 0;
  bool gelu_tanh = false;  // Gelu's approximate="tanh"

  static ActivationParams defaults(Activation a) {
    // clang-format off
    switch (a) {
      case Activation::LeakyRelu: return {.alpha = 0.01};
      case Activation::Elu: return {.alpha = 1.0};
      case Activation::Celu: return {.alpha = 1.0};
      case Activation::Selu: return {.alpha = 1.67326319217681884765625, .gamma = 1.05070102214813232421875};
      case Activation::HardSigmoid: return {.alpha = 0.2, .beta = 0.5};
      case Activation::Clip: return {.alpha = -std::numeric_limits<double>::infinity(),
                                     .beta = std::numeric_limits<double>::infinity()};
      default: return {};
    }
    // clang-format on
  }
};

// The parameters of `a` from a node's or kernel spec's attributes (anything with get_float/get_string).
template <typename Attributes>
ActivationParams activation_params(Activation a, const Attributes& attributes) {
  ActivationParams p = ActivationParams::defaults(a);
  p.alpha = attributes.get_float("alpha", p.alpha);
  p.beta = attributes.get_float("beta", p.beta);
  p.gamma = attributes.get_float("gamma", p.gamma);
  p.gelu_tanh = a == Activation::Gelu && attributes.get_string("approximate", "none") == "tanh";
  return p;
}

// 1 / (1 + exp(-x)) without overflow for large |x|.
template <typename T>
ONNXTRAIN_HOST_DEVICE inline T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// --- one functor per activation: operator()(dy, x) = dy * f'(x) ---

template <typename T>
struct ReluGrad {  // 0 at x = 0
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return x > T(0) ? dy : T(0); }
};
template <typename T>
struct LeakyReluGrad {  // alpha at x = 0
  T alpha;
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return x > T(0) ? dy : alpha * dy; }
};
template <typename T>
struct EluGrad {  // alpha * exp(x) for x <= 0
  T alpha;
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return x > T(0) ? dy : dy * alpha * std::exp(x); }
};
template <typename T>
struct SeluGrad {  // gamma, or gamma * alpha * exp(x) for x <= 0
  T alpha, gamma;
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    return x > T(0) ? dy * gamma : dy * gamma * alpha * std::exp(x);
  }
};
template <typename T>
struct SigmoidGrad {  // s (1 - s)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    const T s = stable_sigmoid(x);
    return dy * s * (T(1) - s);
  }
};
template <typename T>
struct TanhGrad {  // 1 - tanh²
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    const T t = std::tanh(x);
    return dy * (T(1) - t * t);
  }
};
template <typename T>
struct GeluErfGrad {  // Φ(x) + x φ(x)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    const T inv_sqrt2 = T(0.70710678118654752440);
    const T inv_sqrt_2pi = T(0.39894228040143267794);
    const T cdf = T(0.5) * (T(1) + std::erf(x * inv_sqrt2));
    return dy * (cdf + x * inv_sqrt_2pi * std::exp(T(-0.5) * x * x));
  }
};
template <typename T>
struct GeluTanhGrad {  // d/dx 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x³); PyTorch's formula
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    const T beta = T(0.79788456080286535588);  // sqrt(2/pi)
    const T kappa = T(0.044715);
    const T t = std::tanh(beta * (x + kappa * x * x * x));
    const T left = T(0.5) * (T(1) + t);
    const T right = T(0.5) * x * (T(1) - t * t) * beta * (T(1) + T(3) * kappa * x * x);
    return dy * (left + right);
  }
};
template <typename T>
struct ErfGrad {  // 2/sqrt(pi) exp(-x²)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return dy * T(1.12837916709551257390) * std::exp(-x * x); }
};
template <typename T>
struct SoftplusGrad {  // sigmoid(x)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return dy * stable_sigmoid(x); }
};
template <typename T>
struct MishGrad {  // tanh(s) + x sigmoid(x) (1 - tanh(s)^2), s = softplus(x)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    const T t = std::tanh(x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)));
    return dy * (t + x * stable_sigmoid(x) * (T(1) - t * t));
  }
};
template <typename T>
struct CeluGrad {  // 1, or exp(x / alpha) for x <= 0
  T alpha;
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return x > T(0) ? dy : dy * std::exp(x / alpha); }
};
template <typename T>
struct HardSigmoidGrad {  // alpha strictly inside 0 < alpha x + beta < 1, else 0
  T alpha, beta;
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    const T v = alpha * x + beta;
    return v > T(0) && v < T(1) ? dy * alpha : T(0);
  }
};
template <typename T>
struct HardSwishGrad {  // y = x relu6(x + 3) / 6: 0 below -3, x/3 + 1/2 on [-3, 3], 1 above
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const {
    if (x < T(-3)) return T(0);
    if (x <= T(3)) return dy * (x / T(3) + T(0.5));
    return dy;
  }
};
template <typename T>
struct AbsGrad {  // sign(x), 0 at 0
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return x > T(0) ? dy : x < T(0) ? -dy : T(0); }
};
template <typename T>
struct SqrtGrad {  // 1 / (2 sqrt(x))
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return dy / (T(2) * std::sqrt(x)); }
};
template <typename T>
struct ExpGrad {  // exp(x)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return dy * std::exp(x); }
};
template <typename T>
struct LogGrad {  // 1 / x
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return dy / x; }
};
template <typename T>
struct ReciprocalGrad {  // -1 / x²
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return -dy / (x * x); }
};

template <typename T>
struct SinGrad {  // cos(x)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return dy * std::cos(x); }
};
template <typename T>
struct CosGrad {  // -sin(x)
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return -dy * std::sin(x); }
};
template <typename T>
struct CeilGrad {  // 0 everywhere, as PyTorch's ceil backward (a step function)
  ONNXTRAIN_HOST_DEVICE T operator()(T, T) const { return T(0); }
};

template <typename T>
struct ClipGrad {  // dy where lo <= x <= hi (torch.clamp's backward: the gradient passes at the bounds), else 0
  T lo, hi;
  ONNXTRAIN_HOST_DEVICE T operator()(T dy, T x) const { return x >= lo && x <= hi ? dy : T(0); }
};

// Calls fn(functor) with the derivative functor of `a` for element type T (host code: a CPU loop, or
// the launch of a kernel templated on the functor).
template <typename T, typename Fn>
void with_activation_grad(Activation a, const ActivationParams& p, Fn&& fn) {
  const T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta), gamma = static_cast<T>(p.gamma);
  // clang-format off
  switch (a) {
    case Activation::Relu: return fn(ReluGrad<T>{});
    case Activation::LeakyRelu: return fn(LeakyReluGrad<T>{alpha});
    case Activation::Elu: return fn(EluGrad<T>{alpha});
    case Activation::Selu: return fn(SeluGrad<T>{alpha, gamma});
    case Activation::Sigmoid: return fn(SigmoidGrad<T>{});
    case Activation::Tanh: return fn(TanhGrad<T>{});
    case Activation::Gelu: return p.gelu_tanh ? fn(GeluTanhGrad<T>{}) : fn(GeluErfGrad<T>{});
    case Activation::Erf: return fn(ErfGrad<T>{});
    case Activation::Softplus: return fn(SoftplusGrad<T>{});
    case Activation::HardSigmoid: return fn(HardSigmoidGrad<T>{alpha, beta});
    case Activation::HardSwish: return fn(HardSwishGrad<T>{});
    case Activation::Abs: return fn(AbsGrad<T>{});
    case Activation::Sqrt: return fn(SqrtGrad<T>{});
    case Activation::Exp: return fn(ExpGrad<T>{});
    case Activation::Log: return fn(LogGrad<T>{});
    case Activation::Reciprocal: return fn(ReciprocalGrad<T>{});
    case Activation::Sin: return fn(SinGrad<T>{});
    case Activation::Cos: return fn(CosGrad<T>{});
    case Activation::Ceil:
    case Activation::Floor:
    case Activation::Sign: return fn(CeilGrad<T>{});  // step functions: 0 everywhere
    case Activation::Clip: return fn(ClipGrad<T>{alpha, beta});
    case Activation::Mish: return fn(MishGrad<T>{});
    case Activation::Celu: return fn(CeluGrad<T>{alpha});
  }
  // clang-format on
}

}  // namespace onnxtrain::derivatives
