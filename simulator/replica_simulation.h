// The replicated strategies played on the event simulation, one device resource per replica or worker,
// step by step as the executor runs them (executor/data_parallel.h, central_storage.h,
// parameter_server.h):
//   dp:R    every replica: forward, backward on its rows; a ring all-reduce of the gradients on the ring
//           (one resource: 2(R−1) latencies + 2(R−1)/R · P / bandwidth, the latency-bandwidth model of a
//           ring); every replica's update after it. With `buckets` > 1 the backward is cut into that many
//           equal parts and each part's share of the all-reduce starts when the part ends (DDP's overlap).
//   cs:R    every replica pulls the weights (P bytes) from the host storage over its own host link,
//           computes, pushes its gradient (P bytes) back; one update on the storage after the last push.
//   ps:W:S  W workers without a barrier: each pulls P bytes (P/S from every shard) over its own host link,
//           computes, pushes P bytes back; every shard then applies its part (update_s / S), one push
//           after another, and the worker pulls again once all its parts are applied.
//
//   ReplicaTimes t{.forward_s = 4e-3, .backward_s = 8e-3, .update_s = 1e-3, .parameter_bytes = 44'000'000};
//   ReplicaSimulation dp = simulate_data_parallel(t, 8, LinkTimes{.bandwidth = 450e9, .latency_s = 2e-6}, 20);
//   double steps_per_s = dp.steady_rate(4);
#pragma once

#include <cstdint>
#include <vector>

#include "simulator/event_simulation.h"
#include "simulator/pipeline_simulation.h"

namespace onnxtrain {

struct ReplicaTimes {
  double forward_s = 0, backward_s = 0;  // one replica's share of a mini-batch (ps: a whole mini-batch)
  double update_s = 0;                   // the optimizer over all parameters
  // dp only, >= 0: the replicas' whole exchange and update as one collective (onnxtrain's host replicas,
  // which sum and step shares of one shared copy of the weights in place); replaces the ring and update_s.
  double sharded_exchange_s = -1;
  int64_t parameter_bytes = 0;   // gradients and weights exchanged per step
  int64_t resident_bytes = 0;    // per device: weights, gradients, optimizer state
  int64_t activation_bytes = 0;  // per device, kept from forward to the end of the backward
};

struct WorkerSummary {
  double busy_s = 0;     // forward, backward, its own update
  double blocked_s = 0;  // waiting for the all-reduce, the storage or a shard
  double comm_s = 0;     // time its exchanges spent on their links
  int64_t peak_memory = 0;
};

struct ReplicaSimulation {
  EventSimulation sim;
  std::vector<int> worker_resource;
  std::vector<WorkerSummary> workers;
  std::vector<double> step_end;  // dp, cs: per step; ps: per mini-batch, in the order they finish
  double makespan = 0;
  double steady_rate(int64_t warmup) const { return rate_between(step_end, warmup, warmup); }
};

// The ring all-reduce of `bytes` over `ranks` on links of this kind: 0 for one rank.
double ring_allreduce_seconds(int64_t bytes, int ranks, const LinkTimes& link);

ReplicaSimulation simulate_data_parallel(const ReplicaTimes& t, int replicas, const LinkTimes& ring, int64_t steps,
                                         int buckets = 1);
ReplicaSimulation simulate_central_storage(const ReplicaTimes& t, int replicas, const LinkTimes& storage,
                                           int64_t steps);
// `steps`: mini-batches per worker.
ReplicaSimulation simulate_parameter_server(const ReplicaTimes& t, int workers, int shards, const LinkTimes& link,
                                            int64_t steps);

}  // namespace onnxtrain
