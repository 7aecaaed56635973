// The forward math of the elementwise ops, written once for every backend: small functors over the
// element type, callable from host code (the reference kernels run them in plain loops) and, compiled by
// nvcc, from the CUDA kernels (kernels/cuda/elementwise_*.cu). The CPU tests of the reference kernels
// therefore cover the arithmetic the GPU runs. The elementwise .cu files are compiled with --fmad=false
// (kernels/cuda/elementwise_sources.cmake), so a·x + b rounds on the device as on the host; only the libm
// behind exp/log/tanh/erf/pow differs (CUDA's maths library is within a few ulp of glibc's).
//
// Each functor reproduces the reference semantics exactly: integer Add/Sub/Mul/Neg/Abs wrap (computed in
// uint64, never signed overflow), Min/Max propagate NaN, Clip leaves NaN alone, comparisons return bool.
// Checks that throw (integer division by zero, 0 to a negative power) stay in the kernels, before the
// functor runs; on a device the functor yields 0 there.
//
//   const elementwise::LeakyRelu<float> f{0.01f};
//   for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);          // host
//   unary_kernel<<<grid, block, 0, stream>>>(x, y, n, f);     // device, same functor
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <type_traits>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE, stable_sigmoid

namespace onnxtrain::elementwise {

template <typename T>
ONNXTRAIN_HOST_DEVICE constexpr bool is_negative(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    return false;
  } else {
    return x < T(0);
  }
}

// Two's-complement negation without signed overflow (INT_MIN stays INT_MIN).
template <typename T>
ONNXTRAIN_HOST_DEVICE constexpr T wrapping_negate(T x) {
  return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(x));
}

// std::clamp's exact semantics (NaN passes through), without <algorithm> in device code.
template <typename T>
ONNXTRAIN_HOST_DEVICE constexpr T clamp_value(T v, T lo, T hi) {
  return v < lo ? lo : hi < v ? hi : v;
}

// --- unary: operator()(x) ---

template <typename T>
struct Relu {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return is_negative(x) ? T(0) : x; }
};
template <typename T>
struct Neg {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return wrapping_negate(x);
    } else {
      return -x;
    }
  }
};
template <typename T>
struct Abs {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return is_negative(x) ? wrapping_negate(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};
template <typename T>  // floating T; integer Erf converts through double in the reference kernel
struct Erf {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::erf(x); }
};
template <typename T>
struct Sigmoid {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return derivatives::stable_sigmoid(x); }
};
template <typename T>
struct Tanh {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::tanh(x); }
};
template <typename T>
struct Sqrt {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::sqrt(x); }
};
template <typename T>
struct Exp {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::exp(x); }
};
template <typename T>
struct Sin {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::sin(x); }
};
template <typename T>
struct Cos {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::cos(x); }
};
template <typename T>
struct Ceil {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::ceil(x); }
};
template <typename T>
struct Floor {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::floor(x); }
};
// Sign: -1, 0 or 1 (NaN stays NaN, as numpy's and ONNX's reference).
template <typename T>
struct Sign {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x > T(0) ? T(1) : T(0);
    } else {
      return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == T(0) ? T(0) : x;
    }
  }
};
template <typename T>
struct Log {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return std::log(x); }
};
template <typename T>
struct Reciprocal {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return T(1) / x; }
};
template <typename T>
struct Softplus {  // log(exp(x) + 1) without overflow
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const {
    return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
};
template <typename T>
struct Mish {  // x tanh(softplus(x)) (opset 18)
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return x * std::tanh(Softplus<T>{}(x)); }
};
template <typename T>
struct Celu {  // x for x > 0, alpha (exp(x / alpha) - 1) below (opset 12)
  T alpha;
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : alpha * std::expm1(x / alpha); }
};
template <typename T>
struct LeakyRelu {
  T alpha;
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return x < 0 ? alpha * x : x; }
};
template <typename T>
struct Elu {
  T alpha;
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return x < 0 ? alpha * std::expm1(x) : x; }
};
template <typename T>
struct Selu {
  T alpha, gamma;
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return gamma * (x > 0 ? x : alpha * std::expm1(x)); }
};
template <typename T>
struct HardSigmoid {
  T alpha, beta;
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return clamp_value(alpha * x + beta, T(0), T(1)); }
};
template <typename T>
struct HardSwish {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return x * clamp_value(x / T(6) + T(0.5), T(0), T(1)); }
};
template <typename T>
struct GeluErf {  // 0.5 x (1 + erf(x / sqrt 2))
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return T(0.5) * x * (T(1) + std::erf(x / std::numbers::sqrt2_v<T>)); }
};
template <typename T>
struct GeluTanh {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³)))
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const {
    const T sqrt_2_over_pi = std::numbers::sqrt2_v<T> * std::numbers::inv_sqrtpi_v<T>;
    return T(0.5) * x * (T(1) + std::tanh(sqrt_2_over_pi * (x + T(0.044715) * x * x * x)));
  }
};
template <typename T>
struct Clip {  // lo > hi gives hi everywhere, as the spec says; NaN stays NaN
  T lo, hi;
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const {
    const T v = x < lo ? lo : x;
    return v > hi ? hi : v;
  }
};

// --- binary arithmetic: operator()(a, b) ---

template <typename T>
struct Add {
  ONNXTRAIN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));  // modular since C++20
    } else {
      return a + b;
    }
  }
};
template <typename T>
struct Sub {
  ONNXTRAIN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    } else {
      return a - b;
    }
  }
};
template <typename T>
struct Mul {
  ONNXTRAIN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    } else {
      return a * b;
    }
  }
};
// Integer division truncates toward zero (as ONNX Runtime does); INT_MIN / -1 wraps. b == 0 is rejected
// by the reference kernel before this runs; here it yields 0 rather than trapping.
template <typename T>
struct Div {
  ONNXTRAIN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return wrapping_negate(a);
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
// Floating base T with exponent type E (opset 12+ lets the exponent have its own type).
template <typename T, typename E>
struct Pow {
  static_assert(std::is_floating_point_v<T>, "integer bases are the reference kernel's integer_pow");
  ONNXTRAIN_HOST_DEVICE T operator()(T base, E exponent) const {
    if constexpr (std::is_same_v<T, E>) {
      return std::pow(base, exponent);
    } else {
      return static_cast<T>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    }
  }
};
// PRelu: the slope applies where x < 0.
template <typename T>
struct PRelu {
  ONNXTRAIN_HOST_DEVICE T operator()(T x, T slope) const { return is_negative(x) ? static_cast<T>(slope * x) : x; }
};

// --- variadic Min/Max/Sum/Mean: combine(acc, next) left to right, then finish(acc, input_count) ---

template <typename T>
ONNXTRAIN_HOST_DEVICE constexpr bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;  // std::isnan without depending on which overloads device code sees
  } else {
    return false;
  }
}

template <typename T>
struct Min {
  ONNXTRAIN_HOST_DEVICE T combine(T a, T b) const {
    if (is_nan(a) || is_nan(b)) return std::numeric_limits<T>::quiet_NaN();
    return b < a ? b : a;
  }
  ONNXTRAIN_HOST_DEVICE T finish(T v, int64_t) const { return v; }
};
template <typename T>
struct Max {
  ONNXTRAIN_HOST_DEVICE T combine(T a, T b) const {
    if (is_nan(a) || is_nan(b)) return std::numeric_limits<T>::quiet_NaN();
    return b > a ? b : a;
  }
  ONNXTRAIN_HOST_DEVICE T finish(T v, int64_t) const { return v; }
};
template <typename T>
struct Sum {
  ONNXTRAIN_HOST_DEVICE T combine(T a, T b) const { return a + b; }
  ONNXTRAIN_HOST_DEVICE T finish(T v, int64_t) const { return v; }
};
template <typename T>
struct Mean {
  ONNXTRAIN_HOST_DEVICE T combine(T a, T b) const { return a + b; }
  ONNXTRAIN_HOST_DEVICE T finish(T v, int64_t count) const { return v / static_cast<T>(count); }
};

// --- comparisons and logic: bool results ---

struct Equal {
  template <typename T>
  ONNXTRAIN_HOST_DEVICE bool operator()(T a, T b) const {
    return a == b;
  }
};
struct Less {
  template <typename T>
  ONNXTRAIN_HOST_DEVICE bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessOrEqual {
  template <typename T>
  ONNXTRAIN_HOST_DEVICE bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Greater {
  template <typename T>
  ONNXTRAIN_HOST_DEVICE bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterOrEqual {
  template <typename T>
  ONNXTRAIN_HOST_DEVICE bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct And {
  ONNXTRAIN_HOST_DEVICE bool operator()(bool a, bool b) const { return a && b; }
};
struct Or {
  ONNXTRAIN_HOST_DEVICE bool operator()(bool a, bool b) const { return a || b; }
};
struct Xor {
  ONNXTRAIN_HOST_DEVICE bool operator()(bool a, bool b) const { return a != b; }
};

// --- Cast between the plain arithmetic types and bool (stored as a byte, non-zero = true) ---

// float → integer truncates toward zero; NaN → 0 and out-of-range values saturate (where static_cast
// would be undefined); → bool is v != 0. The reference Cast (kernels/reference/cast.cc) converts so.
template <typename D, typename S>
ONNXTRAIN_HOST_DEVICE D cast_value(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    const double d = static_cast<double>(v);
    if (d != d) return D(0);
    if (d <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(d);
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace onnxtrain::elementwise
