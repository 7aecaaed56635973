// Vectorised float32 exp, log, erf, expm1 and pow for the "cpu" elementwise kernels: glibc's libmvec (the
// vector variants GCC calls under -ffast-math, accurate to 4 ulp) called directly, 8 lanes with AVX2 and 4
// with SSE2, chosen once at run time; plain std:: calls where glibc is older than 2.35 or not x86-64.
// Each element's result depends on its own input only, so a thread split never changes a value.
//
//   vector_log(x, y, n);                          // y[i] = log(x[i])
//   vector_pow(a, true, &e, false, y, n);         // y[i] = pow(a[i], e)
#pragma once

#include <cstdint>

namespace onnxtrain::cpu::elementwise {

// y[i] = f(x[i]); y may be x (in place).
void vector_exp(const float* x, float* y, int64_t n);
void vector_log(const float* x, float* y, int64_t n);
void vector_erf(const float* x, float* y, int64_t n);
void vector_expm1(const float* x, float* y, int64_t n);
// y[i] = pow(a[i or 0], b[i or 0]): a or b held on one element when not contiguous.
void vector_pow(const float* a, bool a_contiguous, const float* b, bool b_contiguous, float* y, int64_t n);

}  // namespace onnxtrain::cpu::elementwise
