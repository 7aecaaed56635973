// Which build of the "cpu" elementwise loops runs: the hot loops are written once as always-inline
// templates and inlined into a baseline (x86-64 SSE2) caller and an AVX2 caller (ONNXTRAIN_ELEMENTWISE_AVX2: twice the
// lanes), picked at run time by `use_avx2`, which also picks libmvec's 8-lane functions. Not FMA: a*b+c
// stays two roundings, as in the reference kernels.
//
//   template <...> ONNXTRAIN_ELEMENTWISE_AVX2 void loops_avx2(...) { loops(...); }   // loops: always_inline
//   if (use_avx2) return loops_avx2(...);
//   loops(...);
#pragma once

namespace onnxtrain::cpu::elementwise {

#if defined(__x86_64__) && defined(__GNUC__)
#define ONNXTRAIN_ELEMENTWISE_AVX2 __attribute__((target("avx2")))
inline bool cpu_has_avx2() {
  __builtin_cpu_init();  // static initialisers may run before libgcc's
  return __builtin_cpu_supports("avx2") != 0;
}
// AVX-512F: the kernels written with its intrinsics behind target attributes (narrow MaxPool rows,
// kernels/cpu/max_pool_window.h; the skinny Gemm, kernels/cpu/skinny_gemm.h) run only where it is.
inline bool cpu_has_avx512f() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}
#else
#define ONNXTRAIN_ELEMENTWISE_AVX2
inline bool cpu_has_avx2() { return false; }
inline bool cpu_has_avx512f() { return false; }
#endif

// Whether the AVX2 builds run (also libmvec's 8-lane functions); tests turn it off to check the baseline
// builds on an AVX2 machine.
inline bool use_avx2 = cpu_has_avx2();

}  // namespace onnxtrain::cpu::elementwise
