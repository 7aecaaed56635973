// The random draws of Dropout's training mode, shared by the CUDA kernel and its CPU test so that the
// CUDA mask equals the reference mask (kernels/reference/dropout.cc) bit for bit.
//
// The reference draws u = (engine() >> 11) · 2^-53 sequentially from one std::mt19937_64 seeded with
// random_stream_seed(seed, run_index), and keeps element i where u_i >= ratio. Mersenne Twister has no
// cheap per-element jump-ahead, so a GPU thread cannot compute draw i on its own; a single-block device
// twister would serialise every 312 draws. The CUDA kernel therefore runs the same generator on the host
// (dropout_draws), uploads the 53-bit draws from a pinned buffer with cudaMemcpyAsync, and compares them
// on the device with dropout_keeps — the exact double arithmetic of the reference. The draws do not
// depend on ratio or training_mode, which live in device memory, so no host synchronisation is needed.
// (A counter-based generator in the reference, e.g. Philox, would let the device draw on its own.)
//
//   std::vector<uint64_t> draws(n);
//   dropout_draws(random_stream_seed(seed, run_index), draws.data(), n);
//   bool keep = dropout_keeps(draws[i], ratio);
#pragma once

#include <cstdint>
#include <random>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::cuda {

// The n draws of one run: the top 53 bits of successive std::mt19937_64 outputs.
inline void dropout_draws(uint64_t stream_seed, uint64_t* draws, int64_t n) {
  std::mt19937_64 engine(stream_seed);
  for (int64_t i = 0; i < n; ++i) draws[i] = engine() >> 11;
}

// Whether an element with this draw survives dropout at `ratio`: u >= ratio, u = draw · 2^-53 (exact).
ONNXTRAIN_HOST_DEVICE inline bool dropout_keeps(uint64_t draw, double ratio) {
  return static_cast<double>(draw) * 0x1.0p-53 >= ratio;
}

}  // namespace onnxtrain::cuda
