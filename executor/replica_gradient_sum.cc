#include "executor/replica_gradient_sum.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "executor/sharded_optimizer_step.h"
#include "graph/error.h"

namespace onnxtrain {

ReplicaGradientSum::ReplicaGradientSum(int replicas)
    : gradients_(static_cast<size_t>(replicas)),
      weights_(static_cast<size_t>(replicas)),
      taps_(static_cast<size_t>(replicas)),
      row_weights_(static_cast<size_t>(replicas), 1.0) {}

void ReplicaGradientSum::publish(int replica, std::vector<std::span<float>> gradients, double weight,
                                 std::vector<std::span<float>> weights, std::vector<Taps> taps) {
  ONNXTRAIN_CHECK(taps.empty() || taps.size() == gradients.size(), "replica gradient sum: one taps entry per tensor");
  for (size_t t = 0; t < taps.size(); ++t) {
    ONNXTRAIN_CHECK(!taps[t].values || taps[t].layout->elements() == static_cast<int64_t>(gradients[t].size()),
                    "replica gradient sum: a gradient's taps do not cover its tensor");
  }
  gradients_.at(static_cast<size_t>(replica)) = std::move(gradients);
  weights_.at(static_cast<size_t>(replica)) = std::move(weights);
  taps_.at(static_cast<size_t>(replica)) = std::move(taps);
  row_weights_.at(static_cast<size_t>(replica)) = weight;
}

void ReplicaGradientSum::check_published() const {
  const std::vector<std::span<float>>& first = gradients_[0];
  for (size_t k = 1; k < gradients_.size(); ++k) {
    ONNXTRAIN_CHECK(gradients_[k].size() == first.size(), "replica gradient sum: replicas publish different tensors");
    for (size_t t = 0; t < first.size(); ++t)
      ONNXTRAIN_CHECK(gradients_[k][t].size() == first[t].size(), "replica gradient sum: tensor sizes differ");
  }
}

namespace {

// Blocks of a few KiB keep the running sum in L1 while each replica's block streams through once.
constexpr size_t kBlock = 2048;

// sum[0..count) += or = g[0..count) · w, each product rounded to float once. W is a float or a double.
template <typename W>
void add_weighed(const float* __restrict g, W w, size_t count, bool first, float* __restrict sum) {
  if (first) {
    for (size_t i = 0; i < count; ++i) sum[i] = static_cast<float>(g[i] * w);
  } else {
    for (size_t i = 0; i < count; ++i) sum[i] += static_cast<float>(g[i] * w);
  }
}

// The same for a gradient given by its taps: elements [from, from + count) of the full tensor, the zeros
// written (first) or left alone (0·w adds nothing), the taps' products set (first) or added.
template <typename W>
void add_weighed_taps(const ReplicaGradientSum::Taps& taps, W w, size_t from, size_t count, bool first,
                      float* __restrict sum) {
  if (first) std::fill(sum, sum + count, 0.0f);
  const TapLayout& layout = *taps.layout;
  const auto begin = static_cast<int64_t>(from), end = static_cast<int64_t>(from + count);
  const int64_t n = layout.taps();
  for (int64_t r = begin / layout.plane; r * layout.plane < end; ++r) {
    for (int64_t t = 0; t < n; ++t) {
      const int64_t e = r * layout.plane + layout.offsets[t];
      if (e < begin || e >= end) continue;
      const auto product = static_cast<float>(taps.values[r * n + t] * w);
      sum[e - begin] = first ? product : sum[e - begin] + product;
    }
  }
}

// Replica k's gradient t as dense values where it has them: its buffer, or its taps where they are every
// element of each row (as many taps as the plane has positions: the offsets increase within the plane, so
// they are 0, 1, ...; a 1x1 convolution's weight gradient over a single output pixel: the kept taps are the
// gradient itself, and the buffer was never written). Null for taps with zeros between them.
const float* dense_values(const std::vector<std::vector<std::span<float>>>& gradients,
                          const std::vector<std::vector<ReplicaGradientSum::Taps>>& taps, size_t k, size_t t) {
  const ReplicaGradientSum::Taps* tapped = taps[k].empty() || !taps[k][t].values ? nullptr : &taps[k][t];
  if (!tapped) return gradients[k][t].data();
  return tapped->layout->taps() == tapped->layout->plane ? tapped->values : nullptr;
}

// sum[0..count) = Σ_k gradients[k][t][from..from+count) · row_weights[k], in replica order. Where a row
// weight is a float (0.5 for two replicas of equal rows) the products are float multiplications, the same
// bits (is_a_float).
void sum_block(const std::vector<std::vector<std::span<float>>>& gradients,
               const std::vector<std::vector<ReplicaGradientSum::Taps>>& taps, const std::vector<double>& row_weights,
               size_t t, size_t from, size_t count, float* sum) {
  for (size_t k = 0; k < gradients.size(); ++k) {
    const float* dense = dense_values(gradients, taps, k, t);
    const float* g = dense ? dense + from : nullptr;
    const ReplicaGradientSum::Taps* tapped = dense ? nullptr : &taps[k][t];
    const double w = row_weights[k];
    const auto add = [&](auto weight) {
      if (tapped) {
        add_weighed_taps(*tapped, weight, from, count, k == 0, sum);
      } else {
        add_weighed(g, weight, count, k == 0, sum);
      }
    };
    if (is_a_float(w)) {
      add(static_cast<float>(w));
    } else {
      add(w);
    }
  }
}

// Elements [begin, end) of a tensor of n that part `part` of `parts` of replica `replica`'s share (of r) covers.
std::pair<size_t, size_t> share_of(size_t n, size_t r, int replica, int part, int parts) {
  const auto me = static_cast<size_t>(replica), p = static_cast<size_t>(part), ps = static_cast<size_t>(parts);
  const size_t share_begin = n * me / r, share = n * (me + 1) / r - share_begin;
  return {share_begin + share * p / ps, share_begin + share * (p + 1) / ps};
}

// Calls done(t, from, count, sum) for every block of part `part` of `parts` of replica `replica`'s share of
// every tensor t for which skip(t) is false, with sum the block's weighed sum over the replicas.
template <typename Skip, typename Done>
void for_each_summed_block(const std::vector<std::vector<std::span<float>>>& gradients,
                           const std::vector<std::vector<ReplicaGradientSum::Taps>>& taps,
                           const std::vector<double>& row_weights, int replica, int part, int parts, Skip&& skip,
                           Done&& done) {
  const size_t r = gradients.size();
  float sum[kBlock];
  for (size_t t = 0; t < gradients[0].size(); ++t) {
    if (skip(t)) continue;
    const auto [begin, end] = share_of(gradients[0][t].size(), r, replica, part, parts);
    // One replica of weight 1 with the whole gradient (Trainer's own step): the sum is the gradient itself,
    // bit for bit, so it is read where it is rather than copied block by block.
    const float* itself = r == 1 && row_weights[0] == 1.0 ? dense_values(gradients, taps, 0, t) : nullptr;
    for (size_t from = begin; from < end; from += kBlock) {
      const size_t count = std::min(kBlock, end - from);
      if (itself) {
        done(t, from, count, itself + from);
        continue;
      }
      sum_block(gradients, taps, row_weights, t, from, count, sum);
      done(t, from, count, sum);
    }
  }
}

}  // namespace

void ReplicaGradientSum::sum_share(int replica) {
  check_published();
  for (const std::vector<Taps>& taps : taps_)
    for (const Taps& t : taps) ONNXTRAIN_CHECK(!t.values, "replica gradient sum: sum_share of a gradient's taps");
  for_each_summed_block(
      gradients_, taps_, row_weights_, replica, 0, 1, [](size_t) { return false; },
      [&](size_t t, size_t from, size_t count, const float* sum) {
        for (std::vector<std::span<float>>& tensors : gradients_)
          if (tensors[t].data() + from != sum) std::copy_n(sum, count, tensors[t].data() + from);
      });
}

void ReplicaGradientSum::step_share(int replica, const ShardedOptimizerStep& step, int part, int parts) {
  check_published();
  ONNXTRAIN_CHECK(parts >= 1 && part >= 0 && part < parts, "replica gradient sum: part out of range");
  for (size_t k = 0; k < weights_.size(); ++k) {
    ONNXTRAIN_CHECK(weights_[k].size() == gradients_[0].size(), "replica gradient sum: weights not published");
    for (size_t t = 0; t < weights_[k].size(); ++t)
      ONNXTRAIN_CHECK(weights_[k][t].size() == gradients_[0][t].size(), "replica gradient sum: weight sizes differ");
  }
  // The updated elements into the other replicas' weights, unless they share replica 0's.
  const auto copy_to_others = [&](size_t t, size_t from, size_t count) {
    for (size_t k = 1; k < weights_.size(); ++k)
      if (weights_[k][t].data() != weights_[0][t].data())
        std::copy_n(weights_[0][t].data() + from, count, weights_[k][t].data() + from);
  };
  // Dense gradients of 2 to 8 replicas (dp's every tensor but those given by taps with zeros between):
  // summed in the update's own pass, the same bits as a block's sum (apply_sum). ResNet-18's dp:2 on a
  // 2-core AMD EPYC: each replica's share took 5.4-5.6 ms through the blocks, the whole exchange 3.5-4.1 ms
  // this way; the sharded step of 4 replicas' 45 MB, 15.0 ms through the blocks (optimizer_bandwidth_bench).
  const size_t r = gradients_.size();
  const auto in_one_pass = [&](size_t t) {
    if (r < 2 || r > ShardedOptimizerStep::kMaxReplicasInPass) return false;
    for (size_t k = 0; k < r; ++k)
      if (!dense_values(gradients_, taps_, k, t)) return false;
    return true;
  };
  std::vector<const float*> dense(r);
  for (size_t t = 0; t < gradients_[0].size(); ++t) {
    if (!in_one_pass(t)) continue;
    const auto [begin, end] = share_of(gradients_[0][t].size(), r, replica, part, parts);
    if (begin == end) continue;
    for (size_t k = 0; k < r; ++k) dense[k] = dense_values(gradients_, taps_, k, t) + begin;
    step.apply_sum(t, begin, end, weights_[0][t].data() + begin, dense, row_weights_);
    copy_to_others(t, begin, end - begin);
  }
  for_each_summed_block(gradients_, taps_, row_weights_, replica, part, parts, in_one_pass,
                        [&](size_t t, size_t from, size_t count, const float* sum) {
                          step.apply(t, from, from + count, weights_[0][t].data() + from, sum);
                          copy_to_others(t, from, count);
                        });
}

}  // namespace onnxtrain
