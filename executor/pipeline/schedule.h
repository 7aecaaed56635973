// Pipeline schedules as data: a pure function of (strategy, N stages, M micro-batches) that gives every
// stage its instruction list (Forward, Backward, explicit Send/Recv of activations and gradients,
// OptimizerStep, Flush) plus the version accounting the weight policies need. No kernels run here; the
// executor (pipeline_trainer) walks `programs`, the simulator (simulator/pipeline_simulation.h) plays them
// with per-pass times, and `onnxtrain partition ... --schedule STRATEGY` prints `format_schedule_table`.
//
//   Schedule s = make_schedule(PipelineStrategy::spectrain, 4, batches.size());
//   for (const Instruction& in : s.programs[stage]) { ... }                  // what stage `stage` runs
//   int64_t steps_ahead = s.s_forward[stage][i];   // SpecTrain: predict this many updates ahead in F_i
//   std::cout << format_schedule_table(s);
//
// 1F1B (naive, pipedream, spectrain): micro_batches = the mini-batches of the run, each travelling the
// pipeline whole. Stage k warms up with min(N-1-k, M) forwards, then alternates Forward/Backward, then
// drains the remaining backwards; every Backward is followed by that stage's OptimizerStep (asynchronous
// updates), so N-k mini-batches are in flight and N-k-1 updates land between F_i and B_i in steady state.
// Per pass:  [RecvActivation i] Forward i [SendActivation i]          (no recv on stage 0, no send on N-1)
//            [RecvGradient i] Backward i [SendGradient i] OptimizerStep i   (no recv on N-1, no send on 0)
// The sends on each link come in the same order as the neighbour's recvs, and the programs complete with
// any channel capacity >= 1. A rendezvous (capacity 0) deadlocks 1F1B: stage k sends the activation of
// mini-batch j before it receives the gradient of j-(N-1-k), while stage k+1 sends that gradient before
// it receives that activation.
//
// GPipe: micro_batches = M micro-batches of ONE mini-batch; the executor repeats the programs for every
// mini-batch. All M forwards (0..M-1), then all M backwards (0..M-1, so gradients accumulate in
// micro-batch order), then Flush (gradients complete: scale by 1/M) and one OptimizerStep.
// 2bw (PipeDream-2BW): the run's mini-batches cut into M micro-batches each, all in one 1F1B program
// (micro_batches = mini-batches × M, Schedule::micro_per_update = M); after the backward of every M-th
// micro-batch the stage makes one update from their summed gradients. A micro-batch's backward reads the
// weights its forward read (stashed by version: with M >= N-k a stage holds at most two versions, W_t and
// W_(t-1)), so every update applies gradients at most one version stale.
// 1f1b (PipeDream-Flush, the synchronous 1F1B of Megatron-LM and DeepSpeed): GPipe's micro-batches, flush
// and update, in 1F1B order: stage k warms up with min(N-1-k, M) forwards, alternates, drains. The
// backwards still come in micro-batch order, so the gradients, and the weights, equal GPipe's bit for bit,
// while stage k holds at most min(N-k, M) micro-batches' activations instead of M.
//
// Version accounting (1F1B; GPipe: all zero, one version per flush). For stage k and mini-batch i:
//   forward_version[k][i], backward_version[k][i]: optimizer steps stage k has taken before F_i / B_i,
//     counted along its program;
//   target_version[k][i]: the version SpecTrain predicts for mini-batch i on stage k (both passes);
//   s_forward = target - forward_version, s_backward = target - backward_version.
// Targets: `sequential` = W_i, i.e. i updates (the version sequential SGD evaluates mini-batch i at):
//   steady state s_fwd = N-k-1, s_bwd = 0. `paper` = the SpecTrain paper's timeline, simulated: every
//   pass takes half a slot, a slot is a forward half then a backward half, stage k's slots start k half
//   slots after stage 0's; the target of mini-batch i is the number of updates stage k has finished at the
//   start of the slot in which stage 0 runs B_i: steady state s_fwd = floor(k/2)+N-k-1, s_bwd = floor(k/2)
//   (N=4: 3,2,2,1 and 0,0,1,1). Near the start and end of a run the simulated values are smaller (no
//   update exists to predict).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace onnxtrain {

enum class PipelineStrategy { naive, pipedream, spectrain, gpipe, flush_1f1b, two_bw };

// What a pass of a strategy reads: W as it is, the forward's stashed copy (backward), or a prediction.
enum class WeightHandling { current, stash, predict };

// One row per strategy, read by the schedule, the weight policy, the executor and the CLI: a new strategy is
// a row here (and its weight handling, when that is new).
struct StrategyTraits {
  PipelineStrategy strategy;
  const char* name;  // --strategy
  // Micro-batches of one mini-batch per round; their gradients accumulate and the stage makes one update per
  // mini-batch (synchronous). Otherwise every mini-batch travels whole and each backward updates at once.
  bool flushes;
  bool fill_drain;  // flushes: all forwards, then all backwards (GPipe); else 1F1B order
  // Without a flush: M micro-batches per mini-batch flow through the 1F1B pipeline without a break, and
  // the stage sums their gradients into one update per mini-batch (PipeDream-2BW).
  bool accumulates;
  WeightHandling weights;
};
const StrategyTraits& strategy_traits(PipelineStrategy strategy);
// The --strategy names, "naive | pipedream | …", for messages and --help.
std::string pipeline_strategy_names();
// A --strategy name; throws Error listing the known names.
PipelineStrategy parse_pipeline_strategy(std::string_view name);
bool is_pipeline_strategy(std::string_view name);  // one of the names parse_pipeline_strategy accepts
const char* pipeline_strategy_name(PipelineStrategy strategy);

enum class SpecTrainTarget { sequential, paper };
// "sequential" | "paper"; throws Error listing the known names.
SpecTrainTarget parse_spectrain_target(std::string_view name);
const char* spectrain_target_name(SpecTrainTarget target);

enum class Op { Forward, Backward, SendActivation, RecvActivation, SendGradient, RecvGradient, OptimizerStep, Flush };
const char* op_name(Op op);  // "Forward", ...
inline bool is_send(Op op) { return op == Op::SendActivation || op == Op::SendGradient; }
inline bool is_recv(Op op) { return op == Op::RecvActivation || op == Op::RecvGradient; }
inline bool is_transfer(Op op) { return is_send(op) || is_recv(op); }

struct Instruction {
  Op op;
  int64_t micro_batch = -1;  // 0-based mini-batch (1F1B) or micro-batch (flushes); -1 for a Flush and its OptimizerStep
  bool operator==(const Instruction&) const = default;
};

struct Schedule {
  PipelineStrategy strategy = PipelineStrategy::naive;
  SpecTrainTarget target = SpecTrainTarget::sequential;
  int stages = 1;
  int64_t micro_batches = 1;                       // 1F1B: mini-batches in the run; flushes: per mini-batch;
                                                   // 2bw: micro-batches in the run
  int64_t micro_per_update = 1;                    // 2bw: M, the micro-batches of one update; 1 otherwise
  std::vector<std::vector<Instruction>> programs;  // per stage, in execution order
  // [stage][micro_batch], see the header comment.
  std::vector<std::vector<int64_t>> forward_version, backward_version, target_version, s_forward, s_backward;
};

// Throws Error when stages < 1 or micro_batches < 1, or (2bw) micro_batches is not a multiple of
// micro_per_update.
Schedule make_schedule(PipelineStrategy strategy, int stages, int64_t micro_batches,
                       SpecTrainTarget target = SpecTrainTarget::sequential, int64_t micro_per_update = 1);

// Grouped transfers (grouped_transport.h: unbuffered, like NCCL's) queue a stage's consecutive Send and
// Recv instructions and launch them as one group; a Recv first waits for its value's header, which the
// peer sends at its matching Send. For each instruction of `stage`'s program: whether the transfers
// queued before it must be launched first. True at a Recv from a peer that sends that value only after
// its side of one of the queued transfers (gpipe: stage k's last forward activation, then the first
// gradient, which stage k+1 computes from it); waiting for the header with that transfer still queued
// would deadlock. In 1F1B's crossing (stage k sends the activation of i+1 and receives the gradient of j while
// stage k+1 sends that gradient before it receives the activation) the peer sends first, and the two
// must share one group instead: posted alone, each side's send would wait for a recv queued behind it.
std::vector<bool> launch_before(const Schedule& schedule, int stage);

// The time x stage grid with unit pass times (one column per time unit, one row per stage):
//   "F3" forward of 3, "B1" backward of 1 (in 1F1B followed at once by the stage's update), "U" gpipe's
//   update (drawn one unit wide), "." idle; then (1F1B) the versions per pass and SpecTrain's s values, and
//   the bubble fraction per stage these unit times imply.
std::string format_schedule_table(const Schedule& schedule);

}  // namespace onnxtrain
