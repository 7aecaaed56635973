// `--recommend`: every strategy x stages x micro-batches x replicas that the machine's devices hold,
// simulated and ranked by samples/s. Candidates for D devices (counts are powers of two up to D):
//   single; dp:R and cs:R; ps:R:1 and ps:R:2; naive/pipedream/spectrain:N and :NxR (N·R <= D);
//   gpipe:NxM and :NxMxR with M in {N, 2N, 4N} (M <= the batch).
// Those whose peak memory exceeds the device's are left out (and counted). Ranked by samples/s; within 0.5%
// (the same speed) the one without a staleness risk comes first, then the one needing less memory. Each kept one
// carries the reason it is limited (strategy_simulation.h) and, where the convergence study in README.md saw trouble,
// a staleness warning:
//   naive:N, spectrain:N with N >= 4   both diverged at 4 and 8 stages (lr 0.04, Fashion-MNIST CNN)
//   naive:2-3                          stale weights without any correction (N−1 updates behind)
//   pipedream:N with N >= 8            trained, but to lower accuracy (84.17% at 8 stages)
//   ps:W with W >= 4                   diverged in about half the seeds at lr 0.04 (staleness 11–24)
//
//   Recommendation r = recommend(machine, profiles, settings);
//   r.ranked[0].simulation.strategy.spec    // the winner, e.g. "pipedream:2x4"
#pragma once

#include <string>
#include <vector>

#include "simulator/strategy_simulation.h"

namespace onnxtrain {

struct RankedStrategy {
  StrategySimulation simulation;
  std::string staleness_warning;  // empty: none known
};

struct Recommendation {
  std::vector<RankedStrategy> ranked;  // fitting candidates, fastest first
  std::vector<std::string> left_out;   // "gpipe:8x32: memory (...)", or why it could not be simulated
};

std::vector<StrategySpec> recommendation_candidates(int devices, int64_t batch);
// The first of `ranked` (fastest first) without a staleness warning; the first when all carry one.
size_t recommended_index(const std::vector<std::string>& staleness_warnings);
// The `onnxtrain train` command of a strategy: one process (threads or GPUs) unless `processes` (mpirun
// -np, one per device: hybrids, several nodes); --plan when a plan is given, --device cuda on GPUs, --data
// when `data` is given (else train's default, Fashion-MNIST), and -o MODEL.trained.onnx in the current
// folder, so that it runs as printed.
std::string train_command(const std::string& model, const StrategySpec& strategy, int64_t batch,
                          const std::string& plan_path, bool cuda, bool processes, const std::string& data = "");
std::string staleness_warning(const StrategySpec& strategy);
Recommendation recommend(const Machine& machine, const ProfileAt& profiles, const SimulationSettings& settings);

}  // namespace onnxtrain
