// Pipeline stage planning: split a CostProfile's nodes (topological order) into N contiguous, non-empty
// stages so that the slowest stage — the pipeline's time per micro-batch in steady state — is as fast
// as possible, within a per-device memory cap. `plan_pipeline` finds the split by dynamic programming;
// `evaluate_split` prices a split the user gives (`--split 3,7,12`). Both return the same Plan.
//
//   PlanOptions o{.stages = 4, .schedule = PipelineStrategy::pipedream, .micro_batches = 8,
//                 .link = {"nvlink4", 450e9, 2e-6}, .optimizer_slots = 1, .memory_cap = 80'000'000'000};
//   Plan p = plan_pipeline(profile, o);          // throws Error if nothing fits, naming the smallest cap
//   Plan u = evaluate_split(profile, parse_split("3,7,12"), o);
//   o.devices = 8;                               // PipeDream: also choose each stage's replica count
//
// The DP: best[k][j][d] = min over i (and r) of max(best[k−1][i][d−r], time_{k−1}(nodes [i, j), r)),
// a stage allowed only if its memory fits the cap; O(N·n²) with fixed replicas, O(N·n²·D²) with a
// device budget D (n = 2000, N = 16: about 0.5 s).
//
// The model, per stage k (0-based) of N holding nodes [first, end) on R_k replicas, one micro-batch:
//   compute_k   = Σ forward_seconds + backward_seconds of its nodes (one replica)
//   send_fwd_k  = latency + cut_activation_bytes[end] / bandwidth     (k < N−1: activations to stage k+1)
//   send_bwd_k  = latency + cut_gradient_bytes[first] / bandwidth     (k > 0: gradients to stage k−1)
//     A transfer is charged to its SENDER only, once, and is not overlapped with compute: the receiver
//     posts its receive ahead and waits no longer than the sender's slot. Every byte crossing the
//     pipeline is thus paid exactly once, and a cut with zero bytes costs nothing (no message).
//     A skip connection is in cut_*_bytes of every cut it crosses, so it is paid at every boundary.
//   allreduce_k = 2(R−1)·latency + 2(R−1)/R · parameter_bytes / allreduce bandwidth (ring; 0 when R=1)
//   update_k    = (3 + 2·optimizer_slots [+ 1 when the update writes the working weights too]) ·
//                 parameter_bytes / profile.memory_bandwidth   (0 without one)
//                 [+ Σ sum_end_seconds of its nodes for gpipe, 1f1b and 2bw: the weight-gradient products
//                 deferred to the end of the micro-batches' sum, partitioner/node_profiler.h]
//     the stage's optimizer step: it reads weights, gradients and state and writes weights and state
//     (momentum SGD: 5 passes). Without it ResNet-18's 2-stage split on a 2-core CPU gave the stage with
//     layer4 (75% of the weights) 1.3x the other's time: pipedream 1.57x -> 1.74x of one thread with it.
//   predict_k   = (5 [+ 7 with prediction_metrics]) · parameter_bytes / profile.memory_bandwidth, SpecTrain's
//     stages but the last (its s is 0), per micro-batch: the forward's predicted weights written, W put
//     back for the backward, the scoring copies and reads (StagePricer::prediction)
//   time_k      = (compute_k + send_fwd_k + send_bwd_k + predict_k) / R_k + (allreduce_k + update_k) / (R_k · U)
//     R replicas take micro-batches round-robin (PipeDream), so a stage accepts R per slot; they
//     synchronise their gradients and step once per weight update: U = 1 micro-batch per replica for the
//     1F1B schedules (an update after every backward), U = M for GPipe (one update per mini-batch).
//   bottleneck  = max_k time_k, minimised by the DP; ties are broken by the least Σ_k time_k (fewest
//     bytes cut), then by the earliest cuts and the fewest devices. A flushing schedule (gpipe, 1f1b)
//     then moves each cut in turn by 1, 2, 4, ... 64 nodes either way (within 64 of the DP's) to a
//     smaller simulated makespan (below), until none moves: its per-flush fill, drain and updates are not
//     in the bottleneck.
// Memory per device of stage k (bytes, exact integers), P/S/A = its parameter/state/activation bytes:
//   weights P · versions_k (stashed = P · (versions_k − 1)) + gradients P · (1, 2 with a flush's sum)
//   + optimizer P · (optimizer_slots + SpecTrain's kept gradient average when prediction_average)
//   + state S + A · in_flight_k (A holds the received values the backward reads: the cost model keeps a
//   value at the stage whose backward reads it) + in transit max(cut_activation_bytes[end], received − A)
// every copy the executor's WeightPolicy keeps: the master W and the working copy the stage's graphs read
// (2 copies), plus, from the strategy's row of the table (executor/pipeline/schedule.h: its weight
// handling, flush, fill-drain and accumulation),
//   versions_k / in_flight_k:  pipedream 1 + N−k / N−k   (a stash per mini-batch in flight but the newest,
//                                        which reads W until an update: the last stage copies nothing)
//                              naive     2     / N−k     (1F1B without stashing)
//                              spectrain 2 + 2(N−k−1) / N−k (with prediction_metrics: the report's host
//                                        copies of Ŵ and W per prediction waiting for its target)
//                              gpipe     2     / M       (all micro-batches of a mini-batch before backward)
//                              1f1b      2     / min(N−k, M) (1F1B order: gpipe's numbers, less memory)
//                              2bw       2 + min(N−k, ⌈(N−k)/M⌉+1) / N−k  (the versions its micro-batches
//                                        in flight read: two when M ≥ N−k), plus a gradient sum
//   One stage (N = 1) is one device's training: one copy, no working copy.
// Pipeline figures for M micro-batches between flushes (GPipe: per mini-batch; the asynchronous 1F1B
// schedules flush only at the end of a run: pass the run's number of mini-batches, or a large M) come
// from the event simulation of the strategy's schedule (simulate_plan, simulator/pipeline_simulation.h):
// each stage runs its instruction list with forward = Σ forward_seconds / R_k, backward likewise, an
// update of (allreduce_k + update_k) / R_k, and its messages on the link (a replicated stage is simulated
// as one device R_k times as fast, its messages R_k times smaller).
//   makespan  = the simulated time of M micro-batches    single = M · (Σ_k compute_k + Σ_k update_k / U)
//   speedup   = single / makespan;  steady_speedup = (single / M) / bottleneck
//   utilisation     = Σ_k busy_k / (N · makespan)     (busy: the stage's passes and update)
//   bubble_fraction = 1 − utilisation                  (fill, drain, imbalance and waiting on links;
//                                                       (N−1)/(M+N−1) for equal stages and free links)
//   idle_fraction_k = 1 − time_k / bottleneck          (steady-state idling from imbalance)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "executor/pipeline/schedule.h"
#include "partitioner/cost_profile.h"
#include "simulator/pipeline_simulation.h"

namespace onnxtrain {

// A link between devices; the numbers of a LinkPreset (bytes/s per direction, seconds per message).
struct PlanLink {
  std::string name;
  double bandwidth = 0;
  double latency_s = 0;
  bool operator==(const PlanLink&) const = default;
};

struct PlanOptions {
  int stages = 1;
  // Empty: one replica per stage; one entry: that many for every stage; `stages` entries: per stage.
  std::vector<int> replicas;
  // > 0: PipeDream's full recurrence — the DP also chooses each stage's replica count, using at most
  // this many devices in all (at least `stages`); `replicas` must then be empty. Costs O(N·n²·D²).
  int devices = 0;
  // Its row of the strategy table (executor/pipeline/schedule.h) sets the copies and activations counted.
  PipelineStrategy schedule = PipelineStrategy::pipedream;
  int64_t micro_batches = 1;  // M, see the header comment; >= 1
  PlanLink link;              // between consecutive stages
  PlanLink allreduce_link;    // among the replicas of a stage; bandwidth 0: the same as `link`
  int optimizer_slots = 0;    // parameter-sized optimizer buffers: SGD 0, momentum 1, Adam/AdamW 2
  // spectrain: the predictor keeps its own gradient average (plain SGD, Adagrad, L2 weight decay:
  // executor/weight_prediction.h), and the report scores predictions (--prediction-metrics on).
  bool prediction_average = false;
  bool prediction_metrics = true;
  int64_t memory_cap = 0;  // bytes per device; 0: no cap
  // Flushing strategies: the backward writes its gradients into the gradient sum (the CPU executor,
  // InferenceSession::run_into) instead of into buffers of its own that are added after (a GPU).
  bool gradients_into_sum = false;
  // The optimizer step writes the stage's working weights too, one pass more (the CPU executor: a pipeline's
  // host-memory update, ParamSlot::mirror).
  bool update_writes_working = false;
  // For a model of attention blocks (CostProfile::has_attention): cut only where one gradient-carrying
  // tensor crosses (cut_gradient_tensors), between blocks or sublayers, never through an attention,
  // unless no such split fits the memory cap or its bottleneck is over 10% slower than the best split.
  bool cut_between_blocks = true;
  bool operator==(const PlanOptions&) const = default;
};

struct StageMemory {
  int64_t weights = 0;          // one copy of the parameters
  int64_t stashed_weights = 0;  // the further versions kept (versions − 1 copies)
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t state = 0;        // non-trainable initializers (BN running statistics)
  int64_t activations = 0;  // everything kept for the backward, all micro-batches in flight
  // Above `activations` at the stage's peak, one micro-batch's cut tensors on their way: what it sends
  // (held until the send), or what it receives less one micro-batch's kept values (the received tensors
  // are held until its forward runs). What the backward needs of the received tensors is already in
  // `activations`: the cost model keeps a value at the stage whose backward reads it.
  int64_t in_transit = 0;
  int64_t total = 0;
  bool operator==(const StageMemory&) const = default;
};

struct StagePlan {
  int index = 0;
  int64_t first_node = 0, end_node = 0;  // nodes [first_node, end_node) of the profile
  std::string first_name, last_name;
  int replicas = 1;
  std::vector<int> devices;  // device ids of its replicas: stages take consecutive ids from 0
  int weight_versions = 1, in_flight = 1;
  int64_t parameter_bytes = 0;
  double flops = 0;  // forward + backward
  // Seconds per micro-batch on one replica, then the stage's slot (see the header comment).
  double compute_seconds = 0, send_forward_seconds = 0, send_backward_seconds = 0, allreduce_seconds = 0;
  double time_seconds = 0;
  double idle_fraction = 0;
  int64_t bytes_sent_forward = 0;   // activations to the next stage, per micro-batch
  int64_t bytes_sent_backward = 0;  // gradients to the previous stage, per micro-batch
  StageMemory memory;
  bool fits_memory_cap = true;
  bool operator==(const StagePlan&) const = default;
};

struct Plan {
  std::string model, device;
  int64_t batch = 0;
  std::vector<std::string> node_names;  // the profile's nodes in order: a plan belongs to one model
  PlanOptions options;                  // the options it was made with (replicas as given; the
                                        // counts used, chosen with `devices`, are in stages[k].replicas)
  bool user_split = false;              // evaluate_split, not the DP
  std::vector<StagePlan> stages;
  double bottleneck_seconds = 0;        // max_k time_k
  double single_device_seconds = 0;     // Σ compute, one micro-batch
  double makespan_seconds = 0;          // M micro-batches through the pipeline
  double throughput = 0;                // micro-batches/s: M / makespan (0 if every cost is 0)
  double steady_throughput = 0;         // micro-batches/s: 1 / bottleneck (0 if every cost is 0)
  double single_device_throughput = 0;  // micro-batches/s: 1 / Σ compute (0 if every cost is 0)
  double speedup = 0, steady_speedup = 0;
  double bubble_fraction = 0, utilisation = 0;
  double balance = 0;  // bottleneck / (Σ_k time_k / N): 1 is perfect balance
  bool fits_memory_cap = true;
  bool operator==(const Plan&) const = default;
};

// The DP. Throws Error for fewer nodes than stages, bad options, or a cap no split meets (the message
// names smallest_memory_cap).
Plan plan_pipeline(const CostProfile& profile, const PlanOptions& options);

// Prices a user split: `cuts` are the N−1 cut positions (cut c lies between nodes c−1 and c), strictly
// increasing, within 1..n−1. A stage over the memory cap is flagged (fits_memory_cap), not an error.
// With options.devices the replica counts are still chosen, for this split.
Plan evaluate_split(const CostProfile& profile, std::span<const int64_t> cuts, const PlanOptions& options);

// "3,7,12" → {3, 7, 12}; throws Error on anything but comma-separated non-negative integers.
std::vector<int64_t> parse_split(std::string_view text);

// The least per-device cap under which some split into options.stages stages fits (min over splits of
// the largest stage memory); options.memory_cap is ignored.
int64_t smallest_memory_cap(const CostProfile& profile, const PlanOptions& options);

// The per-stage figures of one stage, as the planner computes them (for tests and reports). `replicas`
// 0: the count options.replicas gives stage k.
StagePlan price_stage(const CostProfile& profile, const PlanOptions& options, int k, int64_t first, int64_t end,
                      int replicas = 0);

// The plan's stages as the simulator sees them (see the header comment), and its simulation.
std::vector<StageTimes> plan_stage_times(const CostProfile& profile, const Plan& plan);
PipelineSimulation simulate_plan(const CostProfile& profile, const Plan& plan);

}  // namespace onnxtrain
