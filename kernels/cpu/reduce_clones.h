// Function multi-versioning for the hot loops of the "cpu" reduction kernels: the build targets baseline
// x86-64 (SSE2), so the loop bodies that are compute-bound in cache (max/min selects, exp, arg selects)
// also get an AVX2+FMA clone, chosen once at load time (an ifunc) on machines that have it.
//
//   template <typename F> ONNXTRAIN_REDUCE_CLONES float fold_row(const float* x, int64_t n);
#pragma once

// No clones under ThreadSanitizer: their ifunc resolvers run before TSan is initialised and crash.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 11 && !defined(__SANITIZE_THREAD__)
#define ONNXTRAIN_REDUCE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ONNXTRAIN_REDUCE_CLONES
#endif
