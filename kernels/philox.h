// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
// Random123 library; the generator behind cuRAND's and PyTorch's CUDA dropout) and Dropout's draws made
// from it. Philox is counter-based: a block of four 32-bit outputs is a pure function of a 128-bit counter
// and a 64-bit key, so element i's draw needs no state and no sequence before it. The reference kernel, the
// "cpu" kernel and the CUDA kernel (one device thread per pair of elements) all call these functions and
// so draw the same masks bit for bit. Plain C++ with ONNXTRAIN_HOST_DEVICE: host code and nvcc both compile
// it; the 32x32->64 multiplies are uint64_t products of uint32_t words (mul.wide.u32 on a GPU, no
// __umulhi needed).
//
// Dropout's mapping, fixed here (changing it changes every mask, run after run, on every backend):
//   key     = (low 32 bits of stream_seed, high 32 bits of stream_seed)   stream_seed = random_stream_seed(...)
//   counter = (low 32 bits of i/2, high 32 bits of i/2, 0, 0)
//   (r0, r1, r2, r3) = philox4x32_10(counter, key)
//   draw(i) = ((uint64_t(r1) << 32) | r0) >> 11   for even i,   ((uint64_t(r3) << 32) | r2) >> 11   for odd i
// A draw is a 53-bit integer; element i is kept where draw(i)·2^-53 >= ratio (exact in double).
// draw(i) does not depend on the tensor's size: a larger tensor's mask starts with a smaller one's.
//
//   const uint64_t s = random_stream_seed(seed, stream.run_index());
//   bool keep = dropout_keeps(dropout_draw(s, i), ratio);
//   DropoutDrawPair p = dropout_draw_pair(s, i / 2);   // elements i & ~1 and (i & ~1) + 1, one block
#pragma once

#include <cstdint>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain {

struct Philox4x32Block {
  uint32_t v[4];
};

// The round multipliers and the key schedule's (Weyl) increments: the golden ratio and sqrt(3) - 1 in
// 32-bit fixed point. Vectorised copies of the block function (the "cpu" kernel's AVX2 loop) use these.
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// The 10-round Philox4x32 block function of Random123 (philox4x32_R with R = 10): each round multiplies
// counter words 0 and 2 by kPhiloxM0 and kPhiloxM1 (32x32->64), mixes the high halves with the other two
// words and the key, and the key takes a Weyl step (kPhiloxW0, kPhiloxW1) between rounds.
ONNXTRAIN_HOST_DEVICE constexpr Philox4x32Block philox4x32_10(Philox4x32Block counter, uint32_t key0, uint32_t key1) {
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kPhiloxW0;
      key1 += kPhiloxW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
    const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ key0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ key1;
    c3 = lo0;
  }
  return {{c0, c1, c2, c3}};
}

// The draws of elements 2·pair (even) and 2·pair + 1 (odd): one Philox block (the mapping above).
struct DropoutDrawPair {
  uint64_t even;
  uint64_t odd;
};

ONNXTRAIN_HOST_DEVICE constexpr DropoutDrawPair dropout_draw_pair(uint64_t stream_seed, uint64_t pair) {
  const Philox4x32Block r = philox4x32_10({{static_cast<uint32_t>(pair), static_cast<uint32_t>(pair >> 32), 0u, 0u}},
                                          static_cast<uint32_t>(stream_seed), static_cast<uint32_t>(stream_seed >> 32));
  return {((static_cast<uint64_t>(r.v[1]) << 32) | r.v[0]) >> 11,
          ((static_cast<uint64_t>(r.v[3]) << 32) | r.v[2]) >> 11};
}

// Element i's 53-bit draw (half of a block: callers drawing many elements should use dropout_draw_pair).
ONNXTRAIN_HOST_DEVICE constexpr uint64_t dropout_draw(uint64_t stream_seed, uint64_t i) {
  const DropoutDrawPair p = dropout_draw_pair(stream_seed, i / 2);
  return (i & 1) != 0 ? p.odd : p.even;
}

// Whether an element with this draw survives dropout at `ratio`: u >= ratio with u = draw·2^-53, which
// double represents exactly; the same as the integer test draw >= ceil(ratio·2^53) for ratio in [0, 1).
ONNXTRAIN_HOST_DEVICE constexpr bool dropout_keeps(uint64_t draw, double ratio) {
  return static_cast<double>(draw) * 0x1.0p-53 >= ratio;
}

}  // namespace onnxtrain
