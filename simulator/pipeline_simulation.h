// A pipeline schedule (executor/pipeline/schedule.h) played on the event simulation: every stage walks
// its own instruction list, in order, on its device, exactly as the executor does.
//   Forward i / Backward i / OptimizerStep   the stage's device, for the stage's per-pass seconds
//   Send                                     a transfer on the link to the neighbour (one resource per link
//                                            and direction), latency + bytes / bandwidth; the stage goes
//                                            on at once (the executor's sends are asynchronous)
//   Recv                                     a zero-second point on the stage that waits for the transfer
//   Flush                                    nothing (GPipe's gradient scaling is in the update's time)
// GPipe's programs are one mini-batch; `mini_batches` plays them that many times in a row (the executor
// repeats them); 1F1B programs already hold every mini-batch of the run.
//
// Memory per stage: `resident_bytes` throughout, plus `kept_bytes_per_micro_batch` from the start of a
// micro-batch's forward to the end of its backward (activations kept for the backward, and the input).
//
//   Schedule s = make_schedule(PipelineStrategy::pipedream, 2, 40);
//   std::vector<StageTimes> t = {{.forward_s = 1e-3, .backward_s = 2e-3, .activation_bytes_out = 1 << 20}, ...};
//   PipelineSimulation p = simulate_pipeline(s, t, {LinkTimes{.bandwidth = 450e9, .latency_s = 2e-6}});
//   double rate = p.steady_rate(8);     // mini-batches (gpipe: mini-batches, not micro) per second
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "executor/pipeline/schedule.h"
#include "simulator/event_simulation.h"

namespace onnxtrain {

struct StageTimes {
  double forward_s = 0, backward_s = 0, update_s = 0;  // one (micro-)batch; the update once per step
  // Of update_s: the weight-gradient products a flushing stage deferred to the end of its micro-batches'
  // sum (NodeCost::sum_end_seconds), compute that a simulated machine's memory bandwidth does not price.
  double deferred_products_s = 0;
  int64_t activation_bytes_out = 0;  // sent to stage k+1 per micro-batch
  int64_t gradient_bytes_out = 0;    // sent to stage k-1 per micro-batch
  int64_t resident_bytes = 0;        // weights, their versions, gradients, optimizer state
  int64_t kept_bytes_per_micro_batch = 0;
};

struct LinkTimes {
  double bandwidth = 0;  // bytes/s each way; 0 with bytes to send is an error
  double latency_s = 0;
  double seconds(int64_t bytes) const;  // 0 for nothing to send
};

struct StageSummary {
  double busy_s = 0;           // forward, backward, update
  double blocked_s = 0;        // waiting at a Recv for a value that is not there yet
  double send_s = 0;           // its outgoing transfers' time on the links
  double bubble_fraction = 0;  // 1 - busy / makespan
  int64_t peak_memory = 0;
};

struct PipelineSimulation {
  EventSimulation sim;
  std::vector<int> stage_resource;  // per stage
  std::vector<StageSummary> stages;
  std::vector<double> step_end;  // per mini-batch: when its last update ends on any stage
  double makespan = 0;
  // Mini-batches per second in steady state: over the steps left when `warmup` are left out at each end
  // (the fill and the drain); warmup 0: over the whole run from time 0.
  double steady_rate(int64_t warmup) const;
};

// `links[k]` joins stages k and k+1 (stages − 1 entries, both directions alike). `processors` > 0: the
// stages' forward, backward and update share that many processors (more stages than CPUs, as bench runs
// them: a stage computes when one is free, see event_simulation.h); 0: each stage has its own device.
// Throws Error on sizes that do not match the schedule or negative times.
PipelineSimulation simulate_pipeline(const Schedule& schedule, std::span<const StageTimes> stages,
                                     std::span<const LinkTimes> links, int64_t mini_batches = 1, int processors = 0);

// Steps per second over the steps left when the first `skip_first` and the last `skip_last` are left out:
// count / (end of the last kept − end of the last skipped at the start, or 0). 0 when none is left.
double rate_between(const std::vector<double>& step_end, int64_t skip_first, int64_t skip_last);

}  // namespace onnxtrain
