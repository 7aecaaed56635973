// One strategy on one machine, simulated: the model's per-node costs (a CostProfile at the micro-batch each
// worker runs) become per-pass times, the strategy's schedule is played on the event simulation
// (pipeline_simulation.h, replica_simulation.h) with the machine's links, and the result is read as
// samples/s over whole steps after a warm-up, per-device busy/blocked/communication, peak memory against
// the device's, and the thing that limits it.
//
// Per-pass times: forward = Σ forward_seconds, backward = Σ backward_seconds of the nodes a worker runs;
// the optimizer update U(P) = update_passes · P / (memory bandwidth · memory efficiency) (momentum SGD
// reads weights, gradients and velocity and writes two: 5 passes). Transfers: the machine's links
// (pipeline neighbours: the link between their first devices; dp's ring: its slowest link; central
// storage and parameter servers: the host link). Pipelines use the planner's split (plan_pipeline) at
// the micro-batch (gpipe: B/M). A hybrid N x R is what `train --stages N --replicas R` runs: R copies of
// the pipeline, each on B/R rows, stage k of every copy all-reducing its gradients with the other copies'
// stage k before each update (the ring over those R devices, on the inter-node link once the copies span
// nodes).
//
// Memory per device: pipelines the planner's (weights and their versions, gradients, optimizer state,
// activations of the micro-batches in flight); dp P·(2 + slots) + state + activations at B/R; central
// storage and parameter-server workers 2P + state + activations (the optimizer state is on the host).
//
//   ProfileAt profiles = [&](int64_t micro_batch, int workers) -> CostProfile { return build_cost_profile(...); };
//   StrategySimulation s = simulate_strategy(parse_strategy_specs("pipedream:4", 8)[0], machine, profiles, {});
//   std::printf("%.0f samples/s, limited by %s\n", s.samples_per_s, s.limited_by.c_str());
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "partitioner/cost_profile.h"
#include "partitioner/planner.h"
#include "simulator/event_simulation.h"
#include "simulator/machine.h"
#include "simulator/strategy_spec.h"

namespace onnxtrain {

// The model's costs at a micro-batch, with `workers` of them computing at once (bench's measured CPU
// profiles depend on it: the workers share the cores' caches and memory bandwidth; datasheet devices
// do not). The reference must stay valid until the next call.
using ProfileAt = std::function<const CostProfile&(int64_t micro_batch, int workers)>;

struct SimulationSettings {
  int64_t batch = 32;        // the global mini-batch
  int64_t steps = 40;        // mini-batches simulated (ps: in all)
  int64_t warmup = 8;        // left out of the rate at the start (the pipeline's fill)
  int64_t cooldown = 8;      // and at the end (the drain); bench, which times whole runs, keeps them: 0
  int optimizer_slots = 1;   // parameter-sized optimizer buffers (momentum 1, Adam 2)
  double update_passes = 5;  // passes over the parameters per update
  int dp_buckets = 1;        // > 1: the all-reduce overlaps the backward in this many buckets
  // The devices are this machine's CPU cores, run by onnxtrain's host-memory executor: a pipeline stage
  // sums its micro-batch gradients in place and its update writes the working weights too (one pass more).
  bool host_executor = false;
  // > 0: pipeline stages beyond this many share them (bench's stages beyond this machine's CPUs, each
  // computing when the operating system gives it one); 0: every stage has its own device.
  int processors = 0;
};

struct WorkerFigures {
  std::string name;  // "stage 1", "replica 0", "worker 2"
  double busy_fraction = 0, blocked_fraction = 0, comm_seconds_per_step = 0;
  int64_t peak_memory = 0;
};

struct StrategySimulation {
  StrategySpec strategy;
  double samples_per_s = 0;
  double step_seconds = 0;     // per mini-batch (ps: per mini-batch of all workers together)
  double bubble_fraction = 0;  // 1 − mean busy fraction of the devices
  std::vector<WorkerFigures> workers;
  int64_t peak_memory = 0;  // the largest device's
  bool fits_memory = true;
  std::string limited_by;                      // "compute (devices busy 93%)", "the all-reduce (ring busy 61%)", ...
  std::optional<Plan> plan;                    // pipelines: the split
  std::shared_ptr<const EventSimulation> sim;  // the timeline, for traces
};

// Throws Error when the strategy needs more devices than the machine has, or the model cannot be split.
StrategySimulation simulate_strategy(const StrategySpec& strategy, const Machine& machine, const ProfileAt& profiles,
                                     const SimulationSettings& settings);

// A strategy's workers on `threads` CPUs of this machine (bench): each worker's OpenMP threads
// (threads / devices, at least 1), how many workers' threads fit the CPUs at once, and by how much a
// worker's compute stretches when they do not all fit. Replicas and workers compute all at once, so they
// take turns on the CPUs (time_shared = devices / at_once); pipeline stages idle in their bubbles and lend
// their CPU to the others: time_shared 1, and the simulation runs at most at_once of them at a time
// (SimulationSettings::processors).
struct CpuShare {
  int per_worker = 1;
  int at_once = 1;
  double time_shared = 1;
};
CpuShare cpu_share(const StrategySpec& strategy, int threads);

// Passes over the parameters per update: sgd 3, momentum/nesterov/adagrad 5, adam/adamw 7.
double optimizer_update_passes(const std::string& optimizer);
int optimizer_state_slots(const std::string& optimizer);  // sgd 0, momentum/nesterov/adagrad 1, adam/adamw 2
std::string format_megabytes(int64_t bytes);              // "1.4 MB", "428 MB" (decimal)

}  // namespace onnxtrain
