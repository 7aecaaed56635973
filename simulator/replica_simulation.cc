#include "simulator/replica_simulation.h"

#include <algorithm>
#include <string>

#include "graph/error.h"

namespace onnxtrain {
namespace {

void check(const ReplicaTimes& t, int workers, int64_t steps, const char* what) {
  if (workers < 1 || steps < 1 || t.forward_s < 0 || t.backward_s < 0 || t.update_s < 0 || t.parameter_bytes < 0)
    throw Error(std::string(what) + ": needs at least one worker and one step, and no negative time or size");
}

struct Workers {
  std::vector<int> resource, pool;
};

Workers add_workers(ReplicaSimulation& out, const ReplicaTimes& t, int count, const char* name) {
  Workers w;
  for (int r = 0; r < count; ++r) {
    w.resource.push_back(out.sim.add_resource(std::string(name) + " " + std::to_string(r)));
    w.pool.push_back(out.sim.add_memory_pool(std::string(name) + " " + std::to_string(r), t.resident_bytes));
  }
  out.worker_resource = w.resource;
  return w;
}

// Busy from the worker's own tasks; blocked = the gaps before its tasks that waited on another resource.
void summarise(ReplicaSimulation& out, const Workers& w, const std::vector<int>& comm_resources) {
  out.sim.run();
  out.makespan = out.sim.makespan();
  for (size_t r = 0; r < w.resource.size(); ++r) {
    WorkerSummary s;
    double previous_end = 0;
    for (int id : out.sim.tasks_of(w.resource[r])) {
      s.blocked_s += out.sim.start(id) - previous_end;
      previous_end = out.sim.end(id);
    }
    s.busy_s = out.sim.busy_seconds(w.resource[r]);
    for (int c : comm_resources) s.comm_s += out.sim.busy_seconds(c) / static_cast<double>(w.resource.size());
    s.peak_memory = out.sim.peak_memory(w.pool[r]);
    out.workers.push_back(s);
  }
}

}  // namespace

double ring_allreduce_seconds(int64_t bytes, int ranks, const LinkTimes& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  if (!(link.bandwidth > 0)) throw Error("simulation: the all-reduce link has no bandwidth");
  const double hops = 2.0 * (ranks - 1);
  return hops * link.latency_s + hops / ranks * static_cast<double>(bytes) / link.bandwidth;
}

ReplicaSimulation simulate_data_parallel(const ReplicaTimes& t, int replicas, const LinkTimes& ring, int64_t steps,
                                         int buckets) {
  check(t, replicas, steps, "simulate_data_parallel");
  buckets = std::max(buckets, 1);
  ReplicaSimulation out;
  const Workers w = add_workers(out, t, replicas, "replica");
  const int ring_resource = out.sim.add_resource("all-reduce ring");
  std::vector<int> previous_update(replicas, -1);
  std::vector<int> step_updates;  // replica 0's update of each step: where the step ends
  const bool sharded = t.sharded_exchange_s >= 0 && replicas > 1;  // the update is in the exchange
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<std::vector<int>> parts(replicas);
    for (int r = 0; r < replicas; ++r) {
      SimTask f{.resource = w.resource[r],
                .seconds = t.forward_s,
                .kind = TaskKind::forward,
                .micro_batch = step,
                .memory_pool = w.pool[r],
                .allocate = t.activation_bytes};
      if (previous_update[r] >= 0) f.after = {previous_update[r]};
      out.sim.add_task(std::move(f));
      for (int b = 0; b < buckets; ++b)
        parts[r].push_back(out.sim.add_task({.resource = w.resource[r],
                                             .seconds = t.backward_s / buckets,
                                             .kind = TaskKind::backward,
                                             .micro_batch = step,
                                             .memory_pool = w.pool[r],
                                             .release = b + 1 == buckets ? t.activation_bytes : 0}));
    }
    int reduced = -1;
    for (int b = 0; b < buckets; ++b) {
      SimTask reduce{.resource = ring_resource,
                     .seconds = sharded ? t.sharded_exchange_s / buckets
                                        : ring_allreduce_seconds(t.parameter_bytes / buckets, replicas, ring),
                     .kind = TaskKind::allreduce,
                     .micro_batch = step,
                     .bytes = t.parameter_bytes / buckets};
      for (int r = 0; r < replicas; ++r) reduce.after.push_back(parts[r][b]);
      reduced = out.sim.add_task(std::move(reduce));
    }
    for (int r = 0; r < replicas; ++r)
      previous_update[r] = out.sim.add_task({.resource = w.resource[r],
                                             .seconds = sharded ? 0.0 : t.update_s,
                                             .after = {reduced},
                                             .kind = TaskKind::update,
                                             .micro_batch = step});
    step_updates.push_back(previous_update[0]);
  }
  summarise(out, w, {ring_resource});
  for (int id : step_updates) out.step_end.push_back(out.sim.end(id));
  return out;
}

// Each replica or worker reaches the host by its own link (a GPU's PCIe), one resource each.
std::vector<int> add_links(ReplicaSimulation& out, int count) {
  std::vector<int> links;
  for (int r = 0; r < count; ++r) links.push_back(out.sim.add_resource("host link " + std::to_string(r)));
  return links;
}

ReplicaSimulation simulate_central_storage(const ReplicaTimes& t, int replicas, const LinkTimes& storage,
                                           int64_t steps) {
  check(t, replicas, steps, "simulate_central_storage");
  ReplicaSimulation out;
  const Workers w = add_workers(out, t, replicas, "replica");
  const std::vector<int> link = add_links(out, replicas);
  const int store = out.sim.add_resource("storage");
  const double copy = storage.seconds(t.parameter_bytes);
  int previous_update = -1;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int> pushes;
    for (int r = 0; r < replicas; ++r) {
      SimTask pull{.resource = link[r],
                   .seconds = copy,
                   .kind = TaskKind::pull,
                   .micro_batch = step,
                   .bytes = t.parameter_bytes};
      if (previous_update >= 0) pull.after = {previous_update};
      const int pulled = out.sim.add_task(std::move(pull));
      out.sim.add_task({.resource = w.resource[r],
                        .seconds = t.forward_s,
                        .after = {pulled},
                        .kind = TaskKind::forward,
                        .micro_batch = step,
                        .memory_pool = w.pool[r],
                        .allocate = t.activation_bytes});
      const int backward = out.sim.add_task({.resource = w.resource[r],
                                             .seconds = t.backward_s,
                                             .kind = TaskKind::backward,
                                             .micro_batch = step,
                                             .memory_pool = w.pool[r],
                                             .release = t.activation_bytes});
      pushes.push_back(out.sim.add_task({.resource = link[r],
                                         .seconds = copy,
                                         .after = {backward},
                                         .kind = TaskKind::push,
                                         .micro_batch = step,
                                         .bytes = t.parameter_bytes}));
    }
    previous_update = out.sim.add_task(
        {.resource = store, .seconds = t.update_s, .after = pushes, .kind = TaskKind::update, .micro_batch = step});
  }
  std::vector<int> comm = link;
  comm.push_back(store);
  summarise(out, w, comm);
  for (int id : out.sim.tasks_of(store)) out.step_end.push_back(out.sim.end(id));
  return out;
}

ReplicaSimulation simulate_parameter_server(const ReplicaTimes& t, int workers, int shards, const LinkTimes& link,
                                            int64_t steps) {
  check(t, workers, steps, "simulate_parameter_server");
  if (shards < 1) throw Error("simulate_parameter_server: needs at least one shard");
  ReplicaSimulation out;
  const Workers w = add_workers(out, t, workers, "worker");
  const std::vector<int> links = add_links(out, workers);
  std::vector<int> shard;
  for (int s = 0; s < shards; ++s) shard.push_back(out.sim.add_resource("shard " + std::to_string(s)));
  const int64_t part = t.parameter_bytes / shards;
  std::vector<int> previous(workers, -1);  // each worker's last applied push
  std::vector<int> finish;
  // Mini-batches are handed out in order, one to each worker in turn, and each shard applies the pushes
  // in that order: a fair queue when the workers run at the same speed.
  for (int64_t step = 0; step < steps; ++step) {
    for (int wk = 0; wk < workers; ++wk) {
      const int64_t batch = step * workers + wk;
      SimTask pull{.resource = links[wk],
                   .seconds = shards * link.seconds(part),
                   .kind = TaskKind::pull,
                   .micro_batch = batch,
                   .bytes = part * shards};
      if (previous[wk] >= 0) pull.after = {previous[wk]};
      const int pulled = out.sim.add_task(std::move(pull));
      out.sim.add_task({.resource = w.resource[wk],
                        .seconds = t.forward_s,
                        .after = {pulled},
                        .kind = TaskKind::forward,
                        .micro_batch = batch,
                        .memory_pool = w.pool[wk],
                        .allocate = t.activation_bytes});
      const int backward = out.sim.add_task({.resource = w.resource[wk],
                                             .seconds = t.backward_s,
                                             .kind = TaskKind::backward,
                                             .micro_batch = batch,
                                             .memory_pool = w.pool[wk],
                                             .release = t.activation_bytes});
      const int push = out.sim.add_task({.resource = links[wk],
                                         .seconds = shards * link.seconds(part),
                                         .after = {backward},
                                         .kind = TaskKind::push,
                                         .micro_batch = batch,
                                         .bytes = part * shards});
      // The worker's next pull waits for every shard to apply its push (the executor's push returns then).
      SimTask done{.resource = w.resource[wk], .seconds = 0, .kind = TaskKind::recv, .micro_batch = batch};
      for (int s = 0; s < shards; ++s)
        done.after.push_back(out.sim.add_task({.resource = shard[s],
                                               .seconds = t.update_s / shards,
                                               .after = {push},
                                               .kind = TaskKind::update,
                                               .micro_batch = batch}));
      previous[wk] = out.sim.add_task(std::move(done));
      finish.push_back(previous[wk]);
    }
  }
  std::vector<int> comm = links;
  comm.insert(comm.end(), shard.begin(), shard.end());
  summarise(out, w, comm);
  for (int id : finish) out.step_end.push_back(out.sim.end(id));
  std::sort(out.step_end.begin(), out.step_end.end());
  return out;
}

}  // namespace onnxtrain
