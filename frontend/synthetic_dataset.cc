// Synthetic data that a model can learn: uniform inputs with labels from a fixed random linear map, or a
// token stream whose next id follows from the last by a small step. Only std::mt19937_64's raw output is used (its
// sequence is fixed by the C++ standard), never std::*_distribution, so the data are the same on every platform.
#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "frontend/dataset_readers.h"
#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {

namespace {

float unit_float(std::mt19937_64& rng) { return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f); }  // [0,1)

// The inputs' bytes (count × features floats, plus the class map), refused before anything is allocated
// when they overflow or exceed this machine's memory.
void check_synthetic_size(int64_t features, int64_t classes, int64_t count) {
  uint64_t inputs = 0, map = 0;
  const bool overflow =
      __builtin_mul_overflow(static_cast<uint64_t>(count), static_cast<uint64_t>(features), &inputs) ||
      __builtin_mul_overflow(inputs, uint64_t{sizeof(float)}, &inputs) ||
      __builtin_mul_overflow(static_cast<uint64_t>(classes), static_cast<uint64_t>(features), &map);
  const uint64_t memory = physical_memory_bytes() > 0 ? physical_memory_bytes() : UINT64_MAX;  // 0: not known
  if (overflow || inputs > memory || map > memory / sizeof(float)) {
    throw Error("synthetic data: " + std::to_string(count) + " samples of " + std::to_string(features) + " values" +
                " and " + std::to_string(classes) + " classes need more memory than this machine has (" +
                std::to_string(memory >> 20) + " MiB)");
  }
}

// The class whose row of `weights` scores (sample − 0.5) highest. Eight double accumulators, not one: a
// single running sum is a chain of dependent adds that no compiler may reorder or vectorise (an ImageNet
// sample against 1000 classes took 0.28 s); the partial sums differ from one chain's in the last bits only,
// far below the gap between two class scores.
int64_t best_class(const float* sample, const std::vector<float>& weights, int64_t classes, int64_t features) {
  constexpr int kLanes = 8;
  int64_t best = 0;
  double best_score = 0;
  for (int64_t c = 0; c < classes; ++c) {
    const float* w = weights.data() + c * features;
    double lanes[kLanes] = {};
    int64_t f = 0;
    for (; f + kLanes <= features; f += kLanes)
      for (int k = 0; k < kLanes; ++k) lanes[k] += double{w[f + k]} * (double{sample[f + k]} - 0.5);
    double score = 0;
    for (; f < features; ++f) score += double{w[f]} * (double{sample[f]} - 0.5);
    for (double lane : lanes) score += lane;
    if (c == 0 || score > best_score) best = c, best_score = score;
  }
  return best;
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
  check_synthetic_size(features, classes, count);
  std::mt19937_64 map_rng(seed);
  std::vector<float> weights(static_cast<std::size_t>(classes * features));
  for (float& w : weights) w = 2.0f * unit_float(map_rng) - 1.0f;

  std::vector<int64_t> sizes{count};
  sizes.insert(sizes.end(), sample_shape.begin(), sample_shape.end());
  RawDataset raw{Tensor(DType::Float32, sizes), Tensor(DType::Int64, {count})};
  std::mt19937_64 input_rng(seed ^ (test_split ? 0x7465737400000000ull : 0x747261696e000000ull));  // "test"/"train"
  auto x = raw.inputs.data<float>();
  auto y = raw.labels.data<int64_t>();
  for (float& value : x) value = unit_float(input_rng);  // one generator, in order: the same data everywhere
  // The labels, sample by sample on every core (each is a pure function of its sample).
  std::atomic<int64_t> next{0};
  auto label = [&] {
    for (int64_t n = next++; n < count; n = next++)
      y[n] = best_class(x.data() + n * features, weights, classes, features);
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < std::min(threads, count); ++t) pool.emplace_back(label);
  label();
  for (std::thread& t : pool) t.join();
  return raw;
}

RawDataset make_synthetic_tokens(int64_t seq_len, int64_t vocab, int64_t count, uint64_t seed, bool test_split) {
  if (seq_len < 1 || vocab < 2 || count < 1) {
    throw Error("synthetic token ids need a positive length, at least 2 ids and 1 sample");
  }
  check_synthetic_size(seq_len, 1, count);
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
