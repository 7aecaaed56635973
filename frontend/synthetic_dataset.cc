// Synthetic data that a model can learn: uniform inputs with labels from a fixed random linear map (of the
// sample, or of its means over runs of values when it has more than 4096), or a
// token stream whose next id follows from the last by a small step. Only std::mt19937_64's raw output is used (its
// sequence is fixed by the C++ standard), never std::*_distribution, so the data are the same on every platform.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "frontend/dataset_readers.h"
#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {

namespace {

float unit_float(std::mt19937_64& rng) { return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f); }  // [0,1)

// The inputs' bytes (count × features floats, plus the class map of classes × map_features), refused before
// anything is allocated when they overflow or exceed this machine's memory.
void check_synthetic_size(int64_t features, int64_t map_features, int64_t classes, int64_t count) {
  uint64_t inputs = 0, map = 0;
  const bool overflow =
      __builtin_mul_overflow(static_cast<uint64_t>(count), static_cast<uint64_t>(features), &inputs) ||
      __builtin_mul_overflow(inputs, uint64_t{sizeof(float)}, &inputs) ||
      __builtin_mul_overflow(static_cast<uint64_t>(classes), static_cast<uint64_t>(map_features), &map);
  const uint64_t memory = physical_memory_bytes() > 0 ? physical_memory_bytes() : UINT64_MAX;  // 0: not known
  if (overflow || inputs > memory || map > memory / sizeof(float)) {
    throw Error("synthetic data: " + std::to_string(count) + " samples of " + std::to_string(features) + " values" +
                " and " + std::to_string(classes) + " classes need more memory than this machine has (" +
                std::to_string(memory >> 20) + " MiB)");
  }
}

// No clones under ThreadSanitizer (their ifunc resolvers run before TSan is initialised and crash) or clang
// (the fuzz build), as kernels/cpu/losses_norm_common.h.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define LABEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LABEL_CLONES
#endif
// Eight floats, and eight doubles: one lane per accumulator (GCC's vector extensions, lowered to
// AVX-512, AVX2 or SSE2 by the clone picked at load time).
using Floats8 = float __attribute__((vector_size(32)));
using Doubles8 = double __attribute__((vector_size(64)));
constexpr int kLanes = 8;
constexpr int64_t kSamplesPerBlock = 8;     // share each read of the map
constexpr int64_t kFeaturesPerTile = 1024;  // a block's samples over a tile: 32 KB, in the L1 cache

// The classes whose rows of `weights` score each of a block of `block` samples (at most kSamplesPerBlock)
// − 0.5 highest, into `labels`; `lanes` is the caller's scratch (classes × kSamplesPerBlock × kLanes).
// Eight double accumulators per score, not one: a single running sum is a chain of dependent adds that no
// compiler may reorder or vectorise; the partial sums differ from one chain's in the last bits only, far
// below the gap between two class scores. The block's samples share each read of the map, tile by tile of
// features: reading the map once per sample made the labelling memory-bound (600 MB for ImageNet-sized
// samples and 1000 classes before they were averaged over runs; 96 of them on 2 cores: 5.0 s one sample at
// a time, 3.3 s in blocks). Each score's additions keep their order (lane k adds the features k, k + 8, ...
// in turn, then the tail and the lanes are summed as before), so the labels are those of one sample at a
// time, bit for bit.
LABEL_CLONES void best_classes(const float* samples, int64_t block, const std::vector<float>& weights, int64_t classes,
                               int64_t features, int64_t* labels, std::vector<double>& lanes) {
  // Eight floats widened (into `out`: a 64-byte vector returned by value would change the ABI in the
  // baseline clone).
  const auto load = [](const float* p, Doubles8& out) {
    Floats8 v;
    std::memcpy(&v, p, sizeof v);
    out = __builtin_convertvector(v, Doubles8);
  };
  const int64_t whole = features / kLanes * kLanes;  // the features the lanes take; the rest is each score's tail
  // A short block repeats its last sample (those scores are computed and dropped): the loop over the block
  // has a fixed length, so its accumulators stay in registers.
  const float* rows[kSamplesPerBlock];
  for (int64_t b = 0; b < kSamplesPerBlock; ++b) rows[b] = samples + std::min(b, block - 1) * features;
  // Each score's lanes between tiles, by class and sample (plain doubles: std::allocator does not promise a
  // vector type's 64-byte alignment; the tile's work is on aligned copies).
  lanes.assign(static_cast<size_t>(classes * kSamplesPerBlock * kLanes), 0.0);
  for (int64_t tile = 0; tile < whole; tile += kFeaturesPerTile) {
    const int64_t end = std::min(tile + kFeaturesPerTile, whole);
    for (int64_t c = 0; c < classes; ++c) {
      const float* w = weights.data() + c * features;
      double* kept = lanes.data() + c * kSamplesPerBlock * kLanes;
      Doubles8 acc[kSamplesPerBlock];
      std::memcpy(acc, kept, sizeof acc);
      for (int64_t f = tile; f < end; f += kLanes) {
        Doubles8 wf, xf;
        load(w + f, wf);
#pragma GCC unroll 8
        for (int64_t b = 0; b < kSamplesPerBlock; ++b) {
          load(rows[b] + f, xf);
          acc[b] += wf * (xf - 0.5);
        }
      }
      std::memcpy(kept, acc, sizeof acc);
    }
  }
  double best_score[kSamplesPerBlock] = {};
  for (int64_t c = 0; c < classes; ++c) {
    const float* w = weights.data() + c * features;
    for (int64_t b = 0; b < block; ++b) {
      double score = 0;
      for (int64_t f = whole; f < features; ++f) score += double{w[f]} * (double{samples[b * features + f]} - 0.5);
      for (int k = 0; k < kLanes; ++k) score += lanes[(c * kSamplesPerBlock + b) * kLanes + k];
      if (c == 0 || score > best_score[b]) labels[b] = c, best_score[b] = score;
    }
  }
}

// The labels read at most this many features of a sample: a larger sample (ImageNet-sized: 150528) is
// first averaged over runs of `group` consecutive values. The class map is then classes × 4096 floats at
// most (16 MB for 1000 classes, not 600 MB), drawn in 30 ms instead of 1.3 s, and labelling 96 such
// samples reads 1.5 MB per class instead of 600 MB. Samples of up to 4096 values keep the full linear map.
constexpr int64_t kMaxLabelFeatures = 4096;

// The means of `count` samples of `features` values over runs of `group` (the last run may be shorter),
// into `out` (count × ceil(features / group)); returns out.
const float* average_groups(const float* samples, int64_t count, int64_t features, int64_t group, float* out) {
  const int64_t pooled = (features + group - 1) / group;
  for (int64_t n = 0; n < count; ++n) {
    const float* sample = samples + n * features;
    for (int64_t g = 0; g < pooled; ++g) {
      const int64_t begin = g * group, end = std::min(begin + group, features);
      double sum = 0;
      for (int64_t f = begin; f < end; ++f) sum += sample[f];
      out[n * pooled + g] = static_cast<float>(sum / static_cast<double>(end - begin));
    }
  }
  return out;
}

}  // namespace

RawDataset make_synthetic(const std::vector<int64_t>& sample_shape, int64_t classes, int64_t count, uint64_t seed,
                          bool test_split) {
  int64_t features = 1;
  bool overflow = false;
  for (int64_t s : sample_shape) overflow |= s <= 0 || __builtin_mul_overflow(features, s, &features);
  if (overflow || classes < 2 || count < 1) {
    throw Error("synthetic data needs positive sizes, at least 2 classes and 1 sample");
  }
  const int64_t group = (features + kMaxLabelFeatures - 1) / kMaxLabelFeatures;  // 1 up to 4096 features
  const int64_t label_features = (features + group - 1) / group;
  check_synthetic_size(features, label_features, classes, count);
  std::mt19937_64 map_rng(seed);
  std::vector<float> weights(static_cast<std::size_t>(classes * label_features));
  for (float& w : weights) w = 2.0f * unit_float(map_rng) - 1.0f;

  std::vector<int64_t> sizes{count};
  sizes.insert(sizes.end(), sample_shape.begin(), sample_shape.end());
  RawDataset raw{Tensor(DType::Float32, sizes), Tensor(DType::Int64, {count})};
  std::mt19937_64 input_rng(seed ^ (test_split ? 0x7465737400000000ull : 0x747261696e000000ull));  // "test"/"train"
  auto x = raw.inputs.data<float>();
  auto y = raw.labels.data<int64_t>();
  for (float& value : x) value = unit_float(input_rng);  // one generator, in order: the same data everywhere
  // The labels, a block of samples at a time on every core (each is a pure function of its sample).
  std::atomic<int64_t> next{0};
  auto label = [&] {
    std::vector<float> pooled(group > 1 ? static_cast<size_t>(kSamplesPerBlock * label_features) : 0);
    std::vector<double> lanes;
    for (int64_t n = next.fetch_add(kSamplesPerBlock); n < count; n = next.fetch_add(kSamplesPerBlock)) {
      const int64_t block = std::min(kSamplesPerBlock, count - n);
      const float* samples = x.data() + n * features;
      if (group > 1) samples = average_groups(samples, block, features, group, pooled.data());
      best_classes(samples, block, weights, classes, label_features, y.data() + n, lanes);
    }
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  const int64_t blocks = (count + kSamplesPerBlock - 1) / kSamplesPerBlock;
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < std::min(threads, blocks); ++t) pool.emplace_back(label);
  label();
  for (std::thread& t : pool) t.join();
  return raw;
}

RawDataset make_synthetic_tokens(int64_t seq_len, int64_t vocab, int64_t count, uint64_t seed, bool test_split) {
  if (seq_len < 1 || vocab < 2 || count < 1) {
    throw Error("synthetic token ids need a positive length, at least 2 ids and 1 sample");
  }
  check_synthetic_size(seq_len, 1, 1, count);
  uint64_t length = 0;
  __builtin_mul_overflow(static_cast<uint64_t>(count), static_cast<uint64_t>(seq_len), &length);  // checked above
  std::vector<int64_t> stream(length + 1);
  std::mt19937_64 rng(seed ^ (test_split ? 0x7465737400000000ull : 0x747261696e000000ull));
  int64_t id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  for (int64_t& token : stream) {
    token = id;
    id = (id + 1 + static_cast<int64_t>(rng() % 3)) % vocab;  // a step of 1, 2 or 3: learnable, not fixed
  }
  return token_windows(stream, seq_len, seed, "synthetic token ids");
}

}  // namespace onnxtrain
