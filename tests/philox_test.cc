// kernels/philox.h: Philox4x32-10 against the known-answer vectors of Random123 (tests/kat_vectors,
// "philox4x32 10" lines), the documented mapping from (stream seed, element) to Dropout's 53-bit draw, the
// exactness of dropout_keeps at its threshold, and the statistics a dropout mask needs: the keep fraction
// of a million elements within 5 sigma of 1 - ratio, fresh masks for other run indices and seeds.
#include "kernels/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernel.h"  // random_stream_seed

using namespace onnxtrain;

namespace {

struct KnownAnswer {
  Philox4x32Block counter;
  uint32_t key0, key1;
  Philox4x32Block expected;
};

// Random123 v1.14 tests/kat_vectors: counter words, key words, output words.
constexpr KnownAnswer kKnownAnswers[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     0x00000000,
     0x00000000,
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     0xffffffff,
     0xffffffff,
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     0xa4093822,
     0x299f31d0,
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

constexpr bool same_block(Philox4x32Block a, Philox4x32Block b) {
  return a.v[0] == b.v[0] && a.v[1] == b.v[1] && a.v[2] == b.v[2] && a.v[3] == b.v[3];
}

// The block function is constexpr: a wrong round, multiplier or key step fails the build as well.
static_assert(same_block(philox4x32_10(kKnownAnswers[0].counter, 0, 0), kKnownAnswers[0].expected));

TEST(Philox4x32, KnownAnswerVectors) {
  for (const KnownAnswer& k : kKnownAnswers) {
    const Philox4x32Block r = philox4x32_10(k.counter, k.key0, k.key1);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(r.v[w], k.expected.v[w]) << "word " << w << " key0 " << std::hex << k.key0;
  }
}

TEST(Philox4x32, EveryInputWordMatters) {
  const Philox4x32Block base = philox4x32_10({{1, 2, 3, 4}}, 5, 6);
  for (int w = 0; w < 4; ++w) {
    Philox4x32Block c{{1, 2, 3, 4}};
    c.v[w] ^= 1u << 31;
    EXPECT_FALSE(same_block(philox4x32_10(c, 5, 6), base)) << "counter word " << w;
  }
  EXPECT_FALSE(same_block(philox4x32_10({{1, 2, 3, 4}}, 5 ^ 1, 6), base));
  EXPECT_FALSE(same_block(philox4x32_10({{1, 2, 3, 4}}, 5, 6 ^ (1u << 31)), base));
}

// The mapping documented in kernels/philox.h, rebuilt here from the block function.
TEST(DropoutDraw, FollowsTheDocumentedMapping) {
  const uint64_t seed = 0x0123456789abcdefULL;
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{12345}, uint64_t{12346},
                     (uint64_t{1} << 33) + 7, ~uint64_t{0} - 1, ~uint64_t{0}}) {
    const uint64_t pair = i / 2;
    const Philox4x32Block r = philox4x32_10({{static_cast<uint32_t>(pair), static_cast<uint32_t>(pair >> 32), 0, 0}},
                                            0x89abcdefu, 0x01234567u);
    const uint64_t word = i % 2 == 0 ? (uint64_t{r.v[1]} << 32) | r.v[0] : (uint64_t{r.v[3]} << 32) | r.v[2];
    EXPECT_EQ(dropout_draw(seed, i), word >> 11) << "element " << i;
    const DropoutDrawPair p = dropout_draw_pair(seed, pair);
    EXPECT_EQ(i % 2 == 0 ? p.even : p.odd, word >> 11) << "element " << i;
    EXPECT_LT(dropout_draw(seed, i), uint64_t{1} << 53);
  }
}

// dropout_keeps is u >= ratio with u = draw·2^-53, i.e. draw >= ceil(ratio·2^53) (the "cpu" kernel's
// integer test): check both sides of the threshold, including ratios that are not multiples of 2^-53.
TEST(DropoutDraw, KeepsExactlyFromTheThreshold) {
  for (double ratio : {0.5, 0.1, 0.3, static_cast<double>(0.3f), 1e-300, 0x1.0p-53, 1.0 - 0x1.0p-53, 0.0}) {
    const auto threshold = static_cast<uint64_t>(std::ceil(ratio * 0x1.0p53));
    EXPECT_TRUE(dropout_keeps(threshold, ratio)) << ratio;
    if (threshold > 0) {
      EXPECT_FALSE(dropout_keeps(threshold - 1, ratio)) << ratio;
    }
  }
  EXPECT_TRUE(dropout_keeps((uint64_t{1} << 53) - 1, 1.0 - 0x1.0p-53));  // the largest draw survives any ratio < 1
  EXPECT_TRUE(dropout_keeps(0, 0.0));
}

// Over a million elements the number kept is binomial(n, 1 - ratio): within 5 sigma of its mean. The
// first and second halves of the Philox block (even and odd elements) are counted separately too.
TEST(DropoutDraw, KeepFractionMatchesTheRatio) {
  constexpr int64_t n = 1'000'000;
  const uint64_t seed = random_stream_seed(17, 3);
  for (double ratio : {0.1, 0.25, 0.5, 0.9}) {
    int64_t kept[2] = {0, 0};
    for (int64_t i = 0; i < n; ++i) kept[i % 2] += dropout_keeps(dropout_draw(seed, static_cast<uint64_t>(i)), ratio);
    const double p = 1 - ratio;
    const double total = static_cast<double>(kept[0] + kept[1]);
    EXPECT_LT(std::abs(total - n * p), 5 * std::sqrt(n * p * ratio)) << "ratio " << ratio << " kept " << total;
    for (int half = 0; half < 2; ++half) {
      const double m = n / 2;
      EXPECT_LT(std::abs(static_cast<double>(kept[half]) - m * p), 5 * std::sqrt(m * p * ratio))
          << "ratio " << ratio << " half " << half;
    }
  }
}

// Masks of other run indices and other seeds agree on about half the elements at ratio 0.5 (independent
// masks), not on all of them.
TEST(DropoutDraw, MasksDifferAcrossRunIndicesAndSeeds) {
  constexpr int64_t n = 100'000;
  auto mask = [&](uint64_t stream_seed) {
    std::vector<bool> m(n);
    for (int64_t i = 0; i < n; ++i) m[i] = dropout_keeps(dropout_draw(stream_seed, static_cast<uint64_t>(i)), 0.5);
    return m;
  };
  auto agreement = [&](const std::vector<bool>& a, const std::vector<bool>& b) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) same += a[i] == b[i];
    return static_cast<double>(same);
  };
  const std::vector<bool> base = mask(random_stream_seed(7, 0));
  const double sigma5 = 5 * std::sqrt(n * 0.25);
  const std::vector<std::pair<uint64_t, uint64_t>> others = {{7, 1}, {7, 2}, {8, 0}, {0, 0}, {7, 1000000}};
  for (const auto& [seed, run] : others) {
    EXPECT_LT(std::abs(agreement(base, mask(random_stream_seed(seed, run))) - n / 2.0), sigma5)
        << "seed " << seed << " run " << run;
  }
  EXPECT_EQ(agreement(base, mask(random_stream_seed(7, 0))), n);  // the same run index again: the same mask
}

}  // namespace
