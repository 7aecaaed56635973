// The pipeline planner: the DP against brute force over every split, the pricing against the formulas
// of planner.h computed independently node by node, the memory cap, --split validation, plan.json and
// the Graphviz output.
#include "partitioner/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "graph/error.h"
#include "partitioner/plan_dot.h"
#include "partitioner/plan_io.h"
#include "tests/error_of.h"

using namespace onnxtrain;

namespace {

// A profile of n nodes with random costs; cut bytes random, zero at both ends as cost_profile.h says.
CostProfile random_profile(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<double> seconds(0.0, 1e-3);
  std::uniform_int_distribution<int64_t> bytes(0, 1 << 20);
  std::uniform_int_distribution<int> coin(0, 3);
  CostProfile p;
  p.model = "random";
  p.device = "test";
  p.batch = 8;
  for (int64_t i = 0; i < n; ++i) {
    NodeCost c;
    c.name = "node_" + std::to_string(i);
    c.op_type = "Test";
    c.forward_seconds = seconds(rng);
    c.backward_seconds = coin(rng) == 0 ? 0.0 : 2 * seconds(rng);  // some nodes have no backward
    c.forward_flops = 1e9 * c.forward_seconds;
    c.backward_flops = 1e9 * c.backward_seconds;
    c.parameter_bytes = coin(rng) == 0 ? 0 : bytes(rng);
    c.state_bytes = coin(rng) == 0 ? bytes(rng) / 16 : 0;
    c.activation_bytes = bytes(rng);
    p.nodes.push_back(c);
  }
  p.cut_activation_bytes.assign(static_cast<size_t>(n) + 1, 0);
  p.cut_gradient_bytes.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 1; i < n; ++i) {
    p.cut_activation_bytes[static_cast<size_t>(i)] = coin(rng) == 0 ? 0 : bytes(rng);
    // Integer tensors cross without a gradient: the backward bytes can be smaller.
    p.cut_gradient_bytes[static_cast<size_t>(i)] = p.cut_activation_bytes[static_cast<size_t>(i)] / (1 + coin(rng) % 2);
  }
  return p;
}

PlanOptions random_options(std::mt19937_64& rng, int stages) {
  std::uniform_int_distribution<int> small(0, 3);
  PlanOptions o;
  o.stages = stages;
  o.schedule = static_cast<PipelineStrategy>(std::uniform_int_distribution<int>(0, 5)(rng));
  o.prediction_metrics = small(rng) != 0;
  o.micro_batches = 1 + small(rng) * 3;
  o.link = {"random", std::uniform_real_distribution<double>(1e8, 1e11)(rng),
            std::uniform_real_distribution<double>(0, 1e-4)(rng)};
  if (small(rng) == 0) o.allreduce_link = {"ar", 2e9, 1e-5};
  o.optimizer_slots = small(rng) % 3;
  switch (small(rng)) {
    case 0:
      break;
    case 1:
      o.replicas = {1 + small(rng)};
      break;
    default:
      for (int k = 0; k < stages; ++k) o.replicas.push_back(1 + small(rng) % 2);
  }
  return o;
}

// Every way to put n nodes on `stages` non-empty contiguous stages, as cut positions.
void for_each_split(int64_t n, int stages, const std::function<void(const std::vector<int64_t>&)>& visit) {
  std::vector<int64_t> cuts;
  std::function<void(int64_t)> rec = [&](int64_t from) {
    if (static_cast<int>(cuts.size()) == stages - 1) {
      visit(cuts);
      return;
    }
    const int64_t remaining = stages - 1 - static_cast<int64_t>(cuts.size());
    for (int64_t c = from; c <= n - remaining; ++c) {
      cuts.push_back(c);
      rec(c + 1);
      cuts.pop_back();
    }
  };
  rec(1);
}

int64_t max_memory(const Plan& p) {
  int64_t m = 0;
  for (const StagePlan& s : p.stages) m = std::max(m, s.memory.total);
  return m;
}

void expect_tiles(const Plan& p, int64_t n) {
  int64_t next = 0;
  for (const StagePlan& s : p.stages) {
    EXPECT_EQ(s.first_node, next);
    EXPECT_LT(s.first_node, s.end_node) << "empty stage " << s.index;
    next = s.end_node;
  }
  EXPECT_EQ(next, n);
}

using testing_support::error_of;

// A profile with every node alike and nothing crossing the cuts.
CostProfile uniform_profile(int64_t n) {
  CostProfile p;
  p.model = "uniform";
  for (int64_t i = 0; i < n; ++i)
    p.nodes.push_back({.name = "u" + std::to_string(i),
                       .op_type = "MatMul",
                       .forward_flops = 2e9,
                       .backward_flops = 4e9,
                       .forward_seconds = 1e-3,
                       .backward_seconds = 2e-3,
                       .parameter_bytes = 1000,
                       .activation_bytes = 500});
  p.cut_activation_bytes.assign(static_cast<size_t>(n) + 1, 0);
  p.cut_gradient_bytes.assign(static_cast<size_t>(n) + 1, 0);
  return p;
}

}  // namespace

TEST(Planner, DpEqualsBruteForceOnRandomProfiles) {
  std::mt19937_64 rng(20261130);
  int capped = 0, infeasible = 0, refined = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 10)(rng);
    const int stages = std::uniform_int_distribution<int>(1, static_cast<int>(std::min<int64_t>(4, n)))(rng);
    const CostProfile profile = random_profile(rng, n);
    PlanOptions o = random_options(rng, stages);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": n=" + std::to_string(n) + " N=" + std::to_string(stages));

    // Uncapped brute force first: the least largest-stage memory, to choose a cap in its range.
    double best_free = INFINITY;
    int64_t least_memory = INT64_MAX, most_memory = 0;
    for_each_split(n, stages, [&](const std::vector<int64_t>& cuts) {
      const Plan p = evaluate_split(profile, cuts, o);
      best_free = std::min(best_free, p.bottleneck_seconds);
      least_memory = std::min(least_memory, max_memory(p));
      most_memory = std::max(most_memory, max_memory(p));
    });
    EXPECT_EQ(smallest_memory_cap(profile, o), least_memory);
    if (trial % 3 == 1) {  // a cap between the least and the most any split needs
      o.memory_cap = std::uniform_int_distribution<int64_t>(least_memory, std::max(least_memory, most_memory))(rng);
      ++capped;
    } else if (trial % 3 == 2 && least_memory > 1) {
      o.memory_cap = least_memory - 1;  // nothing fits
    }

    double best = INFINITY;
    for_each_split(n, stages, [&](const std::vector<int64_t>& cuts) {
      const Plan p = evaluate_split(profile, cuts, o);
      if (p.fits_memory_cap) best = std::min(best, p.bottleneck_seconds);
    });
    if (std::isinf(best)) {
      ++infeasible;
      EXPECT_THROW(plan_pipeline(profile, o), Error);
      continue;
    }
    const Plan plan = plan_pipeline(profile, o);
    ASSERT_EQ(plan.stages.size(), static_cast<size_t>(stages));
    expect_tiles(plan, n);
    EXPECT_TRUE(plan.fits_memory_cap);
    if (o.memory_cap > 0) {
      for (const StagePlan& s : plan.stages) EXPECT_LE(s.memory.total, o.memory_cap);
    }
    if (strategy_traits(o.schedule).flushes) {
      // The DP's split moved to a local optimum of the makespan: no better than the worst split of the
      // least bottleneck, and no split that moves one cut by 1, 2, 4 or 8 nodes (and fits) has a smaller
      // makespan.
      std::vector<int64_t> cuts;
      for (const StagePlan& s : plan.stages)
        if (s.index > 0) cuts.push_back(s.first_node);
      double worst_of_best = 0;
      for_each_split(n, stages, [&](const std::vector<int64_t>& other) {
        const Plan p = evaluate_split(profile, other, o);
        if (!p.fits_memory_cap) return;
        if (p.bottleneck_seconds == best) worst_of_best = std::max(worst_of_best, p.makespan_seconds);
        size_t differing = 0;
        int64_t distance = 0;
        for (size_t c = 0; c < cuts.size(); ++c) {
          differing += other[c] != cuts[c];
          distance += std::abs(other[c] - cuts[c]);
        }
        const bool power_of_two = distance > 0 && (distance & (distance - 1)) == 0;
        if (differing == 1 && power_of_two) {
          EXPECT_GE(p.makespan_seconds, plan.makespan_seconds);
        }
      });
      EXPECT_LE(plan.makespan_seconds, worst_of_best);
      ++refined;
      continue;
    }
    EXPECT_EQ(plan.bottleneck_seconds, best);  // same pricing, so bit-identical
    if (o.memory_cap == 0) {
      EXPECT_EQ(plan.bottleneck_seconds, best_free);
    }
    // Ties go to the least total time: no optimal split has a smaller Σ time_k.
    double plan_sum = 0;
    for (const StagePlan& s : plan.stages) plan_sum += s.time_seconds;
    for_each_split(n, stages, [&](const std::vector<int64_t>& cuts) {
      const Plan p = evaluate_split(profile, cuts, o);
      if (!p.fits_memory_cap || p.bottleneck_seconds != best) return;
      double sum = 0;
      for (const StagePlan& s : p.stages) sum += s.time_seconds;
      EXPECT_LE(plan_sum, sum * (1 + 1e-12));
    });
  }
  EXPECT_GT(capped, 100);
  EXPECT_GT(infeasible, 50);
  EXPECT_GT(refined, 50);
}

// price_stage against planner.h's formulas written out node by node.
// PipeDream's full recurrence: with a device budget the DP also picks each stage's replica count. The
// oracle prices every split with every replica assignment through the fixed-replicas path.
TEST(Planner, DeviceBudgetEqualsBruteForceOverReplicaCounts) {
  std::mt19937_64 rng(424242);
  int replicated = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    const int stages = std::uniform_int_distribution<int>(1, static_cast<int>(std::min<int64_t>(3, n)))(rng);
    const CostProfile profile = random_profile(rng, n);
    PlanOptions o = random_options(rng, stages);
    o.replicas.clear();
    o.devices = stages + std::uniform_int_distribution<int>(0, 3)(rng);
    if (trial % 2)
      o.memory_cap = smallest_memory_cap(profile, o) + std::uniform_int_distribution<int64_t>(0, 1 << 22)(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": n=" + std::to_string(n) + " N=" + std::to_string(stages) +
                 " D=" + std::to_string(o.devices));
    PlanOptions fixed = o;
    fixed.devices = 0;
    double best = INFINITY;
    for_each_split(n, stages, [&](const std::vector<int64_t>& cuts) {
      double best_here = INFINITY;
      std::vector<int> r(static_cast<size_t>(stages), 1);
      std::function<void(size_t, int)> assign = [&](size_t k, int left) {
        if (k == r.size()) {
          fixed.replicas = r;
          const Plan p = evaluate_split(profile, cuts, fixed);
          best_here = std::min(best_here, p.bottleneck_seconds);
          if (p.fits_memory_cap) best = std::min(best, p.bottleneck_seconds);
          return;
        }
        for (r[k] = 1; r[k] <= left - static_cast<int>(r.size() - k - 1); ++r[k]) assign(k + 1, left - r[k]);
      };
      assign(0, o.devices);
      EXPECT_EQ(evaluate_split(profile, cuts, o).bottleneck_seconds, best_here);
    });
    const Plan plan = plan_pipeline(profile, o);
    EXPECT_EQ(plan.bottleneck_seconds, best);
    int used = 0;
    for (const StagePlan& s : plan.stages) {
      used += s.replicas;
      replicated += s.replicas > 1;
      EXPECT_EQ(s.devices.size(), static_cast<size_t>(s.replicas));
      EXPECT_TRUE(o.memory_cap == 0 || s.memory.total <= o.memory_cap) << s.memory.total << " > " << o.memory_cap;
    }
    EXPECT_LE(used, o.devices);
    expect_tiles(plan, n);
  }
  EXPECT_GT(replicated, 50);

  // One heavy node after a light one: the heavy stage takes the spare devices.
  CostProfile p = uniform_profile(2);
  p.nodes[1].forward_seconds *= 4;
  p.nodes[1].backward_seconds *= 4;
  const Plan plan = plan_pipeline(p, {.stages = 2, .devices = 5, .link = {"l", 1e12, 0}});
  EXPECT_EQ(plan.stages[0].replicas, 1);
  EXPECT_EQ(plan.stages[1].replicas, 4);
  EXPECT_EQ(plan.stages[1].devices, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 2, .devices = 1, .link = {"l", 1e9, 0}});
            }).find("need at least 2 devices"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 2, .replicas = {2}, .devices = 4, .link = {"l", 1e9, 0}});
            }).find("not both"),
            std::string::npos);
}

TEST(Planner, StagePricingFollowsTheFormulas) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(2, 10)(rng);
    const int stages = std::uniform_int_distribution<int>(2, static_cast<int>(std::min<int64_t>(4, n)))(rng);
    const CostProfile profile = random_profile(rng, n);
    const PlanOptions o = random_options(rng, stages);
    const int k = std::uniform_int_distribution<int>(0, stages - 1)(rng);
    // Leave room for the stages before and after.
    const int64_t first = std::uniform_int_distribution<int64_t>(k, n - (stages - k))(rng);
    const int64_t end = std::uniform_int_distribution<int64_t>(first + 1, n - (stages - k - 1))(rng);
    const StagePlan s = price_stage(profile, o, k, first, end);

    double compute = 0;
    int64_t p = 0, state = 0, act = 0;
    for (int64_t i = first; i < end; ++i) {
      const NodeCost& c = profile.nodes[static_cast<size_t>(i)];
      compute += c.forward_seconds + c.backward_seconds;
      p += c.parameter_bytes;
      state += c.state_bytes;
      act += c.activation_bytes;
    }
    const int r = o.replicas.empty() ? 1 : o.replicas.size() == 1 ? o.replicas[0] : o.replicas[static_cast<size_t>(k)];
    auto transfer = [&](int64_t b) { return b > 0 ? o.link.latency_s + b / o.link.bandwidth : 0.0; };
    const double fwd = k + 1 < stages ? transfer(profile.cut_activation_bytes[static_cast<size_t>(end)]) : 0.0;
    const double bwd = k > 0 ? transfer(profile.cut_gradient_bytes[static_cast<size_t>(first)]) : 0.0;
    const PlanLink& ar = o.allreduce_link.bandwidth > 0 ? o.allreduce_link : o.link;
    const double allreduce = r > 1 ? 2.0 * (r - 1) * ar.latency_s + 2.0 * (r - 1) / r * p / ar.bandwidth : 0.0;
    const bool flushes = o.schedule == PipelineStrategy::gpipe || o.schedule == PipelineStrategy::flush_1f1b ||
                         o.schedule == PipelineStrategy::two_bw;
    const double per_update = flushes ? static_cast<double>(o.micro_batches) : 1.0;
    const double time = (compute + fwd + bwd) / r + allreduce / (r * per_update);
    EXPECT_NEAR(s.compute_seconds, compute, 1e-12 * compute + 1e-300);
    EXPECT_NEAR(s.time_seconds, time, 1e-12 * time);
    EXPECT_DOUBLE_EQ(s.allreduce_seconds, allreduce);

    // The executor's copies: master + working (one device: just one), pipedream's stashes, spectrain's
    // scoring copies; a flush's gradient sum.
    int versions = stages == 1 ? 1 : 2;
    int64_t in_flight = stages - k;
    // pipedream: a stash per mini-batch in flight but the newest (the lazy stash reads W until an update).
    if (stages > 1 && o.schedule == PipelineStrategy::pipedream) versions += stages - k - 1;
    if (stages > 1 && o.schedule == PipelineStrategy::spectrain && o.prediction_metrics)
      versions += 2 * (stages - k - 1);
    if (stages > 1 && o.schedule == PipelineStrategy::two_bw) {  // the distinct versions of N−k micro-batches
      const int64_t m = o.micro_batches, held = stages - k;
      versions += static_cast<int>(std::min<int64_t>(held, (held + m - 1) / m + 1));
    }
    if (o.schedule == PipelineStrategy::gpipe) in_flight = o.micro_batches;
    if (o.schedule == PipelineStrategy::flush_1f1b) in_flight = std::min<int64_t>(stages - k, o.micro_batches);
    const int64_t gradients = p * (flushes && stages > 1 ? 2 : 1);
    const int64_t received = k > 0 ? profile.cut_activation_bytes[static_cast<size_t>(first)] : 0;
    const int64_t sent = k + 1 < stages ? profile.cut_activation_bytes[static_cast<size_t>(end)] : 0;
    const int64_t transit = std::max<int64_t>({sent, received - act, 0});
    const int64_t total = p * versions + gradients + p * o.optimizer_slots + state + act * in_flight + transit;
    EXPECT_EQ(s.memory.total, total);
    EXPECT_EQ(s.memory.stashed_weights, p * (versions - 1));
    EXPECT_EQ(s.memory.activations, act * in_flight);
    EXPECT_EQ(s.memory.in_transit, transit);
    EXPECT_EQ(s.parameter_bytes, p);
  }
}

TEST(Planner, ImpossibleCapNamesTheSmallestCapThatWorks) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(2, 10)(rng);
    const int stages = std::uniform_int_distribution<int>(1, static_cast<int>(std::min<int64_t>(4, n)))(rng);
    const CostProfile profile = random_profile(rng, n);
    PlanOptions o = random_options(rng, stages);
    const int64_t need = smallest_memory_cap(profile, o);
    ASSERT_GT(need, 1);
    o.memory_cap = need - 1;
    const std::string message = error_of([&] { plan_pipeline(profile, o); });
    EXPECT_NE(message.find("smallest cap that works is " + std::to_string(need) + " bytes"), std::string::npos)
        << message;
    // No split at all fits one byte less...
    for_each_split(n, stages, [&](const std::vector<int64_t>& cuts) {
      EXPECT_FALSE(evaluate_split(profile, cuts, o).fits_memory_cap);
    });
    // ...and at the named cap the DP finds a plan within it.
    o.memory_cap = need;
    const Plan plan = plan_pipeline(profile, o);
    EXPECT_TRUE(plan.fits_memory_cap);
    EXPECT_LE(max_memory(plan), need);
  }
}

// A tensor from node 0 to node 5 crosses cuts 1..5: every stage boundary between them pays for it.
TEST(Planner, SkipConnectionIsChargedAtEveryBoundaryItCrosses) {
  CostProfile p = uniform_profile(6);
  const int64_t skip = 8 << 20, local = 1 << 10;
  for (size_t i = 1; i < 6; ++i) {
    p.cut_activation_bytes[i] = local + skip;
    p.cut_gradient_bytes[i] = local + skip;
  }
  PlanOptions o{.stages = 3, .link = {"test", 1e9, 1e-5}};
  const Plan plan = evaluate_split(p, std::vector<int64_t>{2, 4}, o);
  const double hop = 1e-5 + (local + skip) / 1e9;
  EXPECT_EQ(plan.stages[0].bytes_sent_forward, local + skip);
  EXPECT_EQ(plan.stages[1].bytes_sent_forward, local + skip);
  EXPECT_EQ(plan.stages[1].bytes_sent_backward, local + skip);
  EXPECT_EQ(plan.stages[2].bytes_sent_backward, local + skip);
  EXPECT_DOUBLE_EQ(plan.stages[0].send_forward_seconds, hop);
  EXPECT_DOUBLE_EQ(plan.stages[1].time_seconds, 2 * 3e-3 + 2 * hop);  // both of its boundaries
  EXPECT_DOUBLE_EQ(plan.stages[2].time_seconds, 2 * 3e-3 + hop);
  // The middle stage keeps its nodes' activations for 2 micro-batches in flight (3 stages minus its
  // index) and holds one micro-batch's skip tensor on its way out.
  EXPECT_EQ(plan.stages[1].memory.activations, 2 * 500 * 2);
  EXPECT_EQ(plan.stages[1].memory.in_transit, local + skip);

  // Only cuts 1..3 carry a heavy skip; with two stages the DP cuts where it is not.
  CostProfile q = uniform_profile(6);
  for (size_t i = 1; i < 6; ++i) q.cut_activation_bytes[i] = q.cut_gradient_bytes[i] = i <= 3 ? skip : local;
  const Plan two = plan_pipeline(q, {.stages = 2, .link = {"test", 1e9, 1e-5}});
  EXPECT_EQ(two.stages[0].end_node, 4);
}

TEST(Planner, UniformProfileBalancesExactly) {
  for (int64_t n : {6, 12}) {
    const CostProfile p = uniform_profile(n);
    for (int stages = 1; stages <= n; ++stages) {
      if (n % stages != 0) continue;
      const Plan plan = plan_pipeline(p, {.stages = stages, .micro_batches = 8, .link = {"l", 1e9, 0}});
      ASSERT_EQ(plan.stages.size(), static_cast<size_t>(stages));
      for (const StagePlan& s : plan.stages) {
        EXPECT_EQ(s.end_node - s.first_node, n / stages);
        EXPECT_NEAR(s.time_seconds, 3e-3 * n / stages, 1e-15);
        EXPECT_NEAR(s.idle_fraction, 0, 1e-12);
      }
      EXPECT_NEAR(plan.balance, 1.0, 1e-12);
      // Balanced: the pipeline figures reduce to the textbook ones.
      const double m = 8;
      EXPECT_NEAR(plan.bubble_fraction, (stages - 1) / (m + stages - 1), 1e-12);
      EXPECT_NEAR(plan.utilisation, 1 - plan.bubble_fraction, 1e-12);
      EXPECT_NEAR(plan.speedup, stages * m / (m + stages - 1), 1e-9);
      EXPECT_NEAR(plan.steady_speedup, stages, 1e-9);
      EXPECT_NEAR(plan.single_device_seconds, 3e-3 * n, 1e-15);
      EXPECT_NEAR(plan.steady_throughput, stages / (3e-3 * n), 1e-6);
    }
  }
}

TEST(Planner, ScheduleStashDepth) {
  const CostProfile p = uniform_profile(8);
  auto plan_for = [&](PipelineStrategy s) {
    return evaluate_split(
        p, std::vector<int64_t>{2, 4, 6},
        {.stages = 4, .schedule = s, .micro_batches = 6, .link = {"l", 1e9, 0}, .optimizer_slots = 2});
  };
  const Plan dream = plan_for(PipelineStrategy::pipedream), naive = plan_for(PipelineStrategy::naive),
             gpipe = plan_for(PipelineStrategy::gpipe), spec = plan_for(PipelineStrategy::spectrain),
             one_f_one_b = plan_for(PipelineStrategy::flush_1f1b);
  for (int k = 0; k < 4; ++k) {
    const auto at = [k](const Plan& p) { return p.stages[static_cast<size_t>(k)]; };
    const StagePlan& d = at(dream);
    // master, working copy, a stash per mini-batch in flight but the newest (it reads W until an update)
    EXPECT_EQ(d.weight_versions, 1 + 4 - k);
    EXPECT_EQ(d.memory.weights, 2000);
    EXPECT_EQ(d.memory.stashed_weights, 2000 * (4 - k));
    EXPECT_EQ(d.memory.optimizer_state, 4000);
    EXPECT_EQ(d.memory.activations, 1000 * (4 - k));
    EXPECT_EQ(at(naive).memory.stashed_weights, 2000);  // the working copy
    EXPECT_EQ(at(naive).memory.activations, 1000 * (4 - k));
    EXPECT_EQ(at(spec).memory.stashed_weights, 2000 * (1 + 2 * (3 - k)));  // + the report's scoring copies
    EXPECT_EQ(at(gpipe).memory.stashed_weights, 2000);
    EXPECT_EQ(at(gpipe).memory.gradients, 2 * 2000);  // the flush's gradient sum
    EXPECT_EQ(at(gpipe).memory.activations, 1000 * 6);
    EXPECT_EQ(at(one_f_one_b).memory.gradients, 2 * 2000);
    EXPECT_EQ(at(one_f_one_b).memory.activations, 1000 * std::min(4 - k, 6));
  }
  auto spectrain_with = [&](bool average, bool metrics) {
    return evaluate_split(p, std::vector<int64_t>{2, 4, 6},
                          {.stages = 4,
                           .schedule = PipelineStrategy::spectrain,
                           .micro_batches = 6,
                           .link = {"l", 1e9, 0},
                           .optimizer_slots = 0,
                           .prediction_average = average,
                           .prediction_metrics = metrics});
  };
  EXPECT_EQ(spectrain_with(true, false).stages[0].memory.optimizer_state, 2000);   // the kept gradient average
  EXPECT_EQ(spectrain_with(false, false).stages[0].memory.stashed_weights, 2000);  // no scoring copies
  EXPECT_EQ(parse_pipeline_strategy("gpipe"), PipelineStrategy::gpipe);
  EXPECT_EQ(parse_pipeline_strategy("1f1b"), PipelineStrategy::flush_1f1b);
  EXPECT_EQ(parse_pipeline_strategy("2bw"), PipelineStrategy::two_bw);
  EXPECT_NE(error_of([] {
              parse_pipeline_strategy("zb-h1");
            }).find("expected naive | pipedream | spectrain | gpipe | 1f1b | 2bw"),
            std::string::npos);
  const Plan two_bw = plan_for(PipelineStrategy::two_bw);  // M = 6 >= N−k: two stashed versions at most
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(two_bw.stages[static_cast<size_t>(k)].memory.stashed_weights, 2000 * (1 + std::min(4 - k, 2)));
    EXPECT_EQ(two_bw.stages[static_cast<size_t>(k)].memory.activations, 1000 * (4 - k));
  }
}

TEST(Planner, ReplicasAddTheRingAllReduce) {
  const CostProfile p = uniform_profile(4);  // 1000 parameter bytes per node
  const PlanOptions o{.stages = 2, .replicas = {1, 4}, .link = {"l", 1e6, 1e-4}};
  const Plan plan = evaluate_split(p, std::vector<int64_t>{2}, o);
  EXPECT_EQ(plan.stages[1].devices, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(plan.stages[0].devices, (std::vector<int>{0}));
  const double allreduce = 2 * 3 * 1e-4 + 2.0 * 3 / 4 * 2000 / 1e6;
  EXPECT_DOUBLE_EQ(plan.stages[1].allreduce_seconds, allreduce);
  EXPECT_DOUBLE_EQ(plan.stages[1].time_seconds, (6e-3 + 0) / 4 + allreduce / 4);  // no cut bytes, no sends
  EXPECT_DOUBLE_EQ(plan.stages[0].allreduce_seconds, 0);
  // Four replicas make the second stage cheaper, so the DP gives it more nodes.
  const Plan dp = plan_pipeline(p, o);
  EXPECT_EQ(dp.stages[0].end_node, 1);
}

// With the device's memory bandwidth in the profile, each stage's optimizer step costs (3 + 2 · slots)
// passes over its parameters, once per update: a stage heavy in parameters is given fewer nodes
// (ResNet-18's layer4: 75% of the weights, a quarter of the FLOPs), and one device pays every update.
TEST(Planner, StagesPayTheirOptimizerUpdate) {
  CostProfile p = uniform_profile(6);
  for (size_t i = 3; i < 6; ++i) p.nodes[i].parameter_bytes = 1'000'000;  // the late layers hold the weights
  const PlanLink link{"l", 1e9, 0};  // no cut bytes in this profile: sends are free
  const PlanOptions o{.stages = 2, .micro_batches = 8, .link = link, .optimizer_slots = 1};
  EXPECT_EQ(plan_pipeline(p, o).stages[0].end_node, 3);  // no bandwidth: the updates are free, an even split
  p.memory_bandwidth = 1e9;  // 5 passes over 1 MB: 5 ms per node, more than its 3 ms of compute
  const Plan plan = plan_pipeline(p, o);
  EXPECT_EQ(plan.stages[0].end_node, 4);  // 12 ms + one heavy update (17 ms) against 6 + 10 ms
  EXPECT_DOUBLE_EQ(plan.stages[1].time_seconds, 2 * 3e-3 + 5.0 * 2'000'000 / 1e9);
  EXPECT_DOUBLE_EQ(plan.stages[0].time_seconds, 4 * 3e-3 + 5.0 * (3 * 1000 + 1'000'000) / 1e9);
  EXPECT_DOUBLE_EQ(plan.single_device_seconds, 6 * 3e-3 + 5.0 * (3 * 1000 + 3 * 1'000'000) / 1e9);
  // GPipe updates once per flush of M micro-batches: an M-th of the update per micro-batch.
  const Plan gpipe = evaluate_split(
      p, std::vector<int64_t>{3},
      {.stages = 2, .schedule = PipelineStrategy::gpipe, .micro_batches = 8, .link = link, .optimizer_slots = 1});
  EXPECT_DOUBLE_EQ(gpipe.stages[1].time_seconds, 3 * 3e-3 + 5.0 * 3'000'000 / 1e9 / 8);
}

TEST(Planner, UserErrors) {
  const CostProfile p = uniform_profile(5);
  const PlanOptions o{.stages = 3, .link = {"l", 1e9, 0}};
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 6, .link = {"l", 1e9, 0}});
            }).find("has 5 nodes, fewer than the 6 stages"),
            std::string::npos);
  // Exactly as many stages as nodes: one node each, none empty.
  const Plan one_each = plan_pipeline(p, {.stages = 5, .link = {"l", 1e9, 0}});
  for (const StagePlan& s : one_each.stages) EXPECT_EQ(s.end_node - s.first_node, 1);

  EXPECT_NE(error_of([&] { evaluate_split(p, std::vector<int64_t>{2}, o); }).find("need 2 cut positions, got 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              evaluate_split(p, std::vector<int64_t>{3, 3}, o);
            }).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              evaluate_split(p, std::vector<int64_t>{3, 2}, o);
            }).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              evaluate_split(p, std::vector<int64_t>{0, 2}, o);
            }).find("outside 1..4"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              evaluate_split(p, std::vector<int64_t>{2, 5}, o);
            }).find("outside 1..4"),
            std::string::npos);
  EXPECT_EQ(evaluate_split(p, parse_split("1,4"), o).stages[2].first_node, 4);
  EXPECT_EQ(parse_split("3,7,12"), (std::vector<int64_t>{3, 7, 12}));
  EXPECT_TRUE(parse_split("").empty());
  for (const char* bad : {"3,,4", "a", "-1", "3;4", "3,", " 3", "99999999999999999999"})
    EXPECT_NE(error_of([&] { parse_split(bad); }).find("is not a non-negative integer"), std::string::npos) << bad;

  EXPECT_NE(error_of([&] { plan_pipeline(p, {.stages = 3}); }).find("bandwidth > 0"), std::string::npos);
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 3, .replicas = {1, 2}, .link = {"l", 1e9, 0}});
            }).find("one count for every stage or 3 counts"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 3, .replicas = {0}, .link = {"l", 1e9, 0}});
            }).find("at least 1 replica"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 3, .micro_batches = 0, .link = {"l", 1e9, 0}});
            }).find("micro-batches must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan_pipeline(CostProfile{}, {}); }).find("has no nodes"), std::string::npos);
  // One stage needs no link.
  EXPECT_EQ(plan_pipeline(p, {}).stages.size(), 1u);
}

// A profile that costs nothing (all sizes unknown, say) still plans, with finite figures that JSON keeps.
TEST(Planner, ZeroCostProfileHasFiniteFigures) {
  CostProfile p;
  for (int i = 0; i < 4; ++i) p.nodes.push_back({.name = "z" + std::to_string(i)});
  p.cut_activation_bytes.assign(5, 0);
  p.cut_gradient_bytes.assign(5, 0);
  const Plan plan = plan_pipeline(p, {.stages = 2, .link = {"l", 1e9, 1e-6}});
  for (double v : {plan.throughput, plan.steady_throughput, plan.speedup, plan.balance, plan.utilisation})
    EXPECT_EQ(v, 0.0);
  EXPECT_EQ(plan.stages[0].send_forward_seconds, 0.0);  // nothing crosses: no message, no latency
  EXPECT_EQ(plan_from_json(plan_to_json(plan), "mem"), plan);
}

// The CPU executor's update writes the working weights too: one pass more over a stage's parameters
// (momentum SGD: 6 against 5).
TEST(Planner, AMirroredUpdateCostsOnePassMore) {
  std::mt19937_64 rng(11);
  CostProfile profile = random_profile(rng, 6);
  profile.memory_bandwidth = 1e10;
  PlanOptions o{.stages = 2, .link = {"l", 1e9, 1e-6}, .optimizer_slots = 1};
  const Plan plain = evaluate_split(profile, std::vector<int64_t>{3}, o);
  o.update_writes_working = true;
  const Plan mirrored = evaluate_split(profile, std::vector<int64_t>{3}, o);
  for (int k = 0; k < 2; ++k) {  // pipedream: an update per micro-batch, so the stage time has all of it
    const double pass = static_cast<double>(plain.stages[k].parameter_bytes) / profile.memory_bandwidth;
    ASSERT_GT(pass, 0.0);
    EXPECT_NEAR(mirrored.stages[k].time_seconds - plain.stages[k].time_seconds, pass, 1e-9 * pass);
  }
}

// SpecTrain's weight handling is priced per micro-batch on every stage but the last: the prediction and
// putting W back (5 passes over the stage's parameters), and with the report's scoring 7 more.
TEST(Planner, SpecTrainPaysForItsPredictionsBeforeTheLastStage) {
  std::mt19937_64 rng(12);
  CostProfile profile = random_profile(rng, 6);
  profile.memory_bandwidth = 1e10;
  PlanOptions o{.stages = 2, .link = {"l", 1e9, 1e-6}, .optimizer_slots = 1};
  const Plan pipedream = evaluate_split(profile, std::vector<int64_t>{3}, o);
  o.schedule = PipelineStrategy::spectrain;
  for (bool metrics : {false, true}) {
    o.prediction_metrics = metrics;
    const Plan spectrain = evaluate_split(profile, std::vector<int64_t>{3}, o);
    const double pass = static_cast<double>(spectrain.stages[0].parameter_bytes) / profile.memory_bandwidth;
    ASSERT_GT(pass, 0.0);
    EXPECT_NEAR(spectrain.stages[0].time_seconds - pipedream.stages[0].time_seconds, (metrics ? 12 : 5) * pass,
                1e-9 * pass);
    EXPECT_DOUBLE_EQ(spectrain.stages[1].time_seconds, pipedream.stages[1].time_seconds);
  }
}

TEST(PlanIo, RoundTripAndModelCheck) {
  std::mt19937_64 rng(5);
  const CostProfile profile = random_profile(rng, 9);
  PlanOptions o = random_options(rng, 3);
  o.replicas = {1, 2, 3};
  o.memory_cap = smallest_memory_cap(profile, o) * 2;
  o.gradients_into_sum = o.update_writes_working = true;  // not the defaults: the file must carry them
  const Plan plan = plan_pipeline(profile, o);
  const std::string path = (std::filesystem::temp_directory_path() / "planner_test_plan.json").string();
  write_plan(plan, path);
  EXPECT_EQ(read_plan(path), plan);  // every field, doubles bit for bit
  const Plan user = evaluate_split(profile, std::vector<int64_t>{1, 8}, o);
  EXPECT_EQ(plan_from_json(plan_to_json(user), "mem"), user);
  PlanOptions budget = o;
  budget.replicas.clear();
  budget.devices = 7;
  const Plan chosen = plan_pipeline(profile, budget);
  EXPECT_EQ(plan_from_json(plan_to_json(chosen), "mem"), chosen);

  std::vector<std::string> names = plan.node_names;
  EXPECT_EQ(read_plan(path, names).stages.size(), 3u);
  names[4] = "other_node";
  EXPECT_NE(error_of([&] { read_plan(path, names); }).find("node 4 is 'node_4', this model's is 'other_node'"),
            std::string::npos);
  names.pop_back();
  EXPECT_NE(error_of([&] { read_plan(path, names); }).find("with 9 nodes; this model has 8"), std::string::npos);

  // A damaged plan: stages that do not tile the nodes, a missing field, not JSON at all.
  std::string text = plan_to_json(plan);
  const std::string gap = std::string("\"first_node\": ") + std::to_string(plan.stages[1].first_node);
  const size_t at = text.find(gap);
  ASSERT_NE(at, std::string::npos);
  std::string damaged = text;
  damaged.replace(at, gap.size(), std::string("\"first_node\": ") + std::to_string(plan.stages[1].first_node + 1));
  EXPECT_NE(error_of([&] { plan_from_json(damaged, "p.json"); }).find("p.json: bad plan: stages[1]: nodes"),
            std::string::npos);
  std::string missing = text;
  missing.replace(missing.find("\"bottleneck_seconds\""), 20, "\"other\"");
  EXPECT_NE(error_of([&] { plan_from_json(missing, "p.json"); }).find("'bottleneck_seconds' is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan_from_json(text.substr(0, text.size() / 2), "p.json"); }).find("not JSON"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan_from_json("{\"format\": \"x\"}", "p.json"); }).find("not an onnxtrain plan"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_plan(path + ".absent"); }).find("cannot open the plan"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(PlanDot, StagesAreColouredAndCutEdgesLabelled) {
  const CostProfile p = uniform_profile(4);
  const Plan plan = evaluate_split(p, std::vector<int64_t>{2}, {.stages = 2, .link = {"l", 1e9, 0}});
  const std::vector<PlanEdge> edges = {{0, 1, 100, "a"}, {1, 2, 3 << 20, "b"}, {0, 3, 2048, "skip"}, {2, 3, 5, "c"}};
  const std::string dot = plan_to_dot(plan, edges);
  EXPECT_NE(dot.find("subgraph cluster_0"), std::string::npos);
  EXPECT_NE(dot.find("subgraph cluster_1"), std::string::npos);
  EXPECT_NE(dot.find("n1 [label=\"u1\", fillcolor=\"#8dd3c7\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n2 [label=\"u2\", fillcolor=\"#ffffb3\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2 [color=\"#d62728\", penwidth=2, fontcolor=\"#d62728\", label=\"b\\n3.00 MiB\"]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("label=\"skip\\n2.00 KiB\"]"), std::string::npos) << dot;  // 1 cut: no count
  EXPECT_NE(dot.find("n0 -> n1;"), std::string::npos) << dot;                   // inside a stage: no label
  EXPECT_NE(dot.find("n2 -> n3;"), std::string::npos) << dot;
  const Plan three = evaluate_split(p, std::vector<int64_t>{1, 2}, {.stages = 3, .link = {"l", 1e9, 0}});
  EXPECT_NE(plan_to_dot(three, edges).find("label=\"skip\\n2.00 KiB, crosses 2 cuts\"]"), std::string::npos);
  const std::vector<PlanEdge> backwards = {{2, 1, 4, "x"}};
  EXPECT_NE(error_of([&] { plan_to_dot(plan, backwards); }).find("not a forward edge"), std::string::npos);
  EXPECT_EQ(format_byte_size(512), "512 B");
  EXPECT_EQ(format_byte_size(1536), "1.50 KiB");
}

// The weight-gradient products a flushing stage deferred to the end of its micro-batches' sum
// (NodeCost::sum_end_seconds) run once per mini-batch, before its update: a gpipe plan prices them with
// the update, once per M micro-batches, and the asynchronous schedules, which sum nothing, not at all.
TEST(Planner, DeferredSumEndsArePricedWithAFlushingStagesUpdate) {
  CostProfile p = uniform_profile(12);
  PlanOptions o{.stages = 2, .schedule = PipelineStrategy::gpipe, .micro_batches = 4, .link = {"l", 1e9, 0}};
  const std::vector<int64_t> cut{6};
  const Plan before = evaluate_split(p, cut, o);
  p.nodes[9].sum_end_seconds = 0.02;
  const Plan after = evaluate_split(p, cut, o);
  EXPECT_NEAR(after.stages[1].time_seconds - before.stages[1].time_seconds, 0.02 / 4, 1e-12);
  EXPECT_DOUBLE_EQ(after.stages[0].time_seconds, before.stages[0].time_seconds);
  // The last stage's update ends the mini-batch, partly beside the first stage's drain.
  EXPECT_GT(after.makespan_seconds, before.makespan_seconds);
  EXPECT_LE(after.makespan_seconds, before.makespan_seconds + 0.02 + 1e-12);
  o.schedule = PipelineStrategy::pipedream;
  EXPECT_DOUBLE_EQ(evaluate_split(p, cut, o).stages[1].time_seconds,
                   evaluate_split(uniform_profile(12), cut, o).stages[1].time_seconds);
}

TEST(Planner, AFlushingScheduleTakesTheSplitOfTheLeastMakespan) {
  // ResNet-18's shape in small: the late layers hold the weights, so the last stage's update is long, but
  // under GPipe it runs while the first stage still drains its backward passes. The DP's bottleneck
  // (compute + update / M) then gives the first stage too much; the makespan, which is what a flush
  // costs, prefers a later cut.
  CostProfile p = uniform_profile(12);
  for (size_t i = 8; i < 12; ++i) p.nodes[i].parameter_bytes = 4'000'000;
  p.memory_bandwidth = 1e9;  // 5 passes over 4 MB: a 20 ms update per weighted node
  const PlanOptions o{.stages = 2,
                      .schedule = PipelineStrategy::gpipe,
                      .micro_batches = 4,
                      .link = {"l", 1e9, 0},
                      .optimizer_slots = 1};
  Plan least_bottleneck, least_makespan;
  for (int64_t cut = 1; cut < 12; ++cut) {
    const Plan split = evaluate_split(p, std::vector<int64_t>{cut}, o);
    if (cut == 1 || split.bottleneck_seconds < least_bottleneck.bottleneck_seconds) least_bottleneck = split;
    if (cut == 1 || split.makespan_seconds < least_makespan.makespan_seconds) least_makespan = split;
  }
  const Plan plan = plan_pipeline(p, o);
  EXPECT_EQ(plan.stages[0].end_node, least_makespan.stages[0].end_node);
  EXPECT_EQ(plan.makespan_seconds, least_makespan.makespan_seconds);
  EXPECT_LT(plan.makespan_seconds, least_bottleneck.makespan_seconds);
  EXPECT_GT(plan.stages[0].end_node, least_bottleneck.stages[0].end_node);
  // The asynchronous schedules keep the DP's split: their steady state is the bottleneck.
  PlanOptions pipedream = o;
  pipedream.schedule = PipelineStrategy::pipedream;
  Plan dp_choice;
  for (int64_t cut = 1; cut < 12; ++cut) {
    const Plan split = evaluate_split(p, std::vector<int64_t>{cut}, pipedream);
    if (cut == 1 || split.bottleneck_seconds < dp_choice.bottleneck_seconds) dp_choice = split;
  }
  EXPECT_EQ(plan_pipeline(p, pipedream).stages[0].end_node, dp_choice.stages[0].end_node);
}
