#include "executor/replica_memory.h"

#include <limits>

#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {
namespace {

// Saturating: a model of many GiB times 100000 replicas must not wrap around to a small figure.
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::numeric_limits<uint64_t>::max();
  return a * b;
}
uint64_t saturating_add(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max() : a + b;
}

// Optimizer state tensors per parameter.
uint64_t optimizer_slots(const OptimizerConfig& o) {
  switch (o.kind) {
    case OptimizerKind::sgd:
      return o.momentum != 0 ? 1 : 0;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      return o.amsgrad ? 3 : 2;
    case OptimizerKind::adagrad:
      return 1;
  }
  return 0;
}

}  // namespace

ReplicaMemoryEstimate estimate_replica_memory(const Graph& forward, int replicas, int threads,
                                              const TrainerOptions& options, bool shared_weights) {
  uint64_t initializer_bytes = 0, parameter_bytes = 0, state_bytes = 0;
  for (ValueId id : forward.initializers) {
    const Value& v = forward.value(id);
    if (!v.data) continue;
    initializer_bytes = saturating_add(initializer_bytes, v.data->nbytes());
    if (v.role == ValueRole::Parameter) parameter_bytes = saturating_add(parameter_bytes, v.data->nbytes());
    if (v.role == ValueRole::State) state_bytes = saturating_add(state_bytes, v.data->nbytes());
  }
  ReplicaMemoryEstimate e;
  const uint64_t optimizer_bytes = saturating_mul(parameter_bytes, optimizer_slots(options.optimizer));
  if (shared_weights) {  // only on the CPU
    e.shared_bytes = saturating_add(initializer_bytes - state_bytes, optimizer_bytes);
    e.per_replica_bytes = saturating_add(state_bytes, parameter_bytes);
  } else {
    // The replica's own copy of the initializers in host memory; on the CPU also the gradients and the
    // optimizer state (on a GPU those live in device memory).
    e.per_replica_bytes = initializer_bytes;
    if (options.device.kind != DeviceKind::Cuda)
      e.per_replica_bytes = saturating_add(e.per_replica_bytes, saturating_add(parameter_bytes, optimizer_bytes));
  }
  e.thread_stack_bytes = default_thread_stack_bytes();
  e.resident_bytes =
      saturating_add(e.shared_bytes, saturating_mul(e.per_replica_bytes, static_cast<uint64_t>(std::max(replicas, 0))));
  e.address_space_bytes = saturating_add(
      e.resident_bytes, saturating_mul(e.thread_stack_bytes, static_cast<uint64_t>(std::max(threads, 0))));
  return e;
}

void check_replicas_fit_in_memory(const Graph& forward, int replicas, int threads, const TrainerOptions& options,
                                  const std::string& option, bool shared_weights) {
  const ReplicaMemoryEstimate e = estimate_replica_memory(forward, replicas, threads, options, shared_weights);
  const std::string what = option + ": not enough memory: " + std::to_string(replicas) + " replicas need at least ";
  const std::string each =
      shared_weights
          ? " (" + format_memory_size(e.shared_bytes) + " for the weights and optimizer state they share, " +
                format_memory_size(e.per_replica_bytes) + " each for their gradients and statistics"
          : " (" + format_memory_size(e.per_replica_bytes) + " each for their weights, gradients and optimizer state";
  const uint64_t physical = physical_memory_bytes();
  if (physical > 0 && e.resident_bytes > physical)
    throw Error(what + format_memory_size(e.resident_bytes) + each + "), more than this machine's " +
                format_memory_size(physical) + "; use fewer replicas");
  const uint64_t left = address_space_left_bytes();
  if (e.address_space_bytes > left)
    throw Error(
        what + format_memory_size(e.address_space_bytes) + " of address space" + each + ", and " +
        std::to_string(threads) + " replica threads with stacks of " + format_memory_size(e.thread_stack_bytes) +
        "), more than the " + format_memory_size(left) +
        " this process may still map under its memory limit (ulimit -v); use fewer replicas, or raise the limit");
}

}  // namespace onnxtrain
