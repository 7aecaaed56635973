// Whether R replicas of a model fit in this process before any is built (`--strategy dp|ps --replicas R`,
// `--central-storage`): each replica holds its own copy of the weights, their gradients and its optimizer's
// state (dp's sharded replicas share one copy of the weights and the state: see shared_weights), and every
// replica but the first runs on a thread of its own, whose stack takes address space.
//
//   check_replicas_fit_in_memory(model.graph, 1000, trainer_options, "--replicas 1000");
//   // Error: "--replicas 1000: not enough memory: ... (ulimit -v ...); use fewer replicas"
#pragma once

#include <cstdint>
#include <string>

#include "executor/trainer.h"
#include "graph/graph.h"

namespace onnxtrain {

struct ReplicaMemoryEstimate {
  uint64_t per_replica_bytes = 0;    // host memory of one replica (weights, gradients, optimizer state)
  uint64_t shared_bytes = 0;         // with shared weights: the one copy of them and of the optimizer state
  uint64_t thread_stack_bytes = 0;   // address space of one replica thread's stack
  uint64_t resident_bytes = 0;       // all replicas' host memory
  uint64_t address_space_bytes = 0;  // that plus the replica threads' stacks
};

// A lower bound (the activations and the kernels' buffers come on top): `replicas` replicas, `threads`
// of them on threads of their own. `shared_weights`: the replicas read one copy of the initializers but
// their BatchNorm statistics and one replica keeps the optimizer state (DataParallelTrainer's sharded
// step), so a replica's own memory is its statistics and its gradients.
ReplicaMemoryEstimate estimate_replica_memory(const Graph& forward, int replicas, int threads,
                                              const TrainerOptions& options, bool shared_weights = false);

// Throws Error naming `option` when that lower bound is more than this machine's physical memory or than the
// address space RLIMIT_AS (`ulimit -v`) leaves this process, so the run stops with one clear line before
// the allocations (and thread starts) that would fail.
void check_replicas_fit_in_memory(const Graph& forward, int replicas, int threads, const TrainerOptions& options,
                                  const std::string& option, bool shared_weights = false);

}  // namespace onnxtrain
