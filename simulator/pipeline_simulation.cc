#include "simulator/pipeline_simulation.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "graph/error.h"

namespace onnxtrain {

double LinkTimes::seconds(int64_t bytes) const {
  if (bytes <= 0) return 0;
  if (!(bandwidth > 0))
    throw Error("simulation: a link with " + std::to_string(bytes) + " bytes to carry has no bandwidth");
  return latency_s + static_cast<double>(bytes) / bandwidth;
}

double rate_between(const std::vector<double>& step_end, int64_t skip_first, int64_t skip_last) {
  const int64_t n = static_cast<int64_t>(step_end.size());
  skip_first = std::max<int64_t>(skip_first, 0);
  skip_last = std::max<int64_t>(skip_last, 0);
  if (skip_first + skip_last >= n) return 0;
  const int64_t last = n - 1 - skip_last;
  const double from = skip_first == 0 ? 0.0 : step_end[static_cast<size_t>(skip_first - 1)];
  const double span = step_end[static_cast<size_t>(last)] - from;
  return span > 0 ? static_cast<double>(last - skip_first + 1) / span : 0.0;
}

double PipelineSimulation::steady_rate(int64_t warmup) const { return rate_between(step_end, warmup, warmup); }

PipelineSimulation simulate_pipeline(const Schedule& schedule, std::span<const StageTimes> stages,
                                     std::span<const LinkTimes> links, int64_t mini_batches, int processors) {
  const int n = schedule.stages;
  if (static_cast<int>(stages.size()) != n || static_cast<int>(links.size()) != n - 1 || mini_batches < 1)
    throw Error("simulate_pipeline: " + std::to_string(n) + " stages need " + std::to_string(n) + " stage times and " +
                std::to_string(n - 1) + " links, and at least one mini-batch");
  for (const StageTimes& t : stages)
    if (t.forward_s < 0 || t.backward_s < 0 || t.update_s < 0) throw Error("simulate_pipeline: negative pass time");
  const bool gpipe = strategy_traits(schedule.strategy).flushes;  // gpipe, 1f1b: the programs repeat per mini-batch
  PipelineSimulation out;
  EventSimulation& sim = out.sim;
  const int cpus = processors > 0 && processors < n ? sim.add_processors(processors) : -1;
  std::vector<int> pool(n);
  for (int k = 0; k < n; ++k) {
    out.stage_resource.push_back(sim.add_resource("stage " + std::to_string(k)));
    pool[k] = sim.add_memory_pool("stage " + std::to_string(k), stages[k].resident_bytes);
  }
  // Link resources: forward (k -> k+1) and backward (k+1 -> k) directions of each link.
  std::vector<int> link_forward(std::max(n - 1, 0)), link_backward(std::max(n - 1, 0));
  for (int k = 0; k + 1 < n; ++k) {
    link_forward[k] = sim.add_resource("link " + std::to_string(k) + "->" + std::to_string(k + 1));
    link_backward[k] = sim.add_resource("link " + std::to_string(k + 1) + "->" + std::to_string(k));
  }
  // The transfer task of each (op, receiving stage, micro-batch), for the matching Recv.
  std::map<std::tuple<Op, int, int64_t>, int> transfer;
  const int64_t per_repeat = gpipe ? schedule.micro_batches : 0;
  const int64_t steps = gpipe ? mini_batches : schedule.micro_batches / schedule.micro_per_update;
  std::vector<std::vector<int>> updates(n);  // per stage: its update tasks in step order
  // A task can wait only on tasks added before it: each stage's program is walked up to its next Recv
  // whose Send is not added yet, stage after stage, until every program is done (programs that complete
  // always get there). GPipe's programs are walked once per mini-batch.
  for (int64_t r = 0; r < (gpipe ? mini_batches : 1); ++r) {
    std::vector<size_t> pc(n, 0);
    std::vector<int> last(n, -1);  // the stage's last Forward/Backward/update/Recv: what its next Send follows
    bool progress = true;
    while (progress) {
      progress = false;
      for (int k = 0; k < n; ++k) {
        const auto& program = schedule.programs[k];
        while (pc[k] < program.size()) {
          const Instruction& in = program[pc[k]];
          const int64_t mb = in.micro_batch < 0 ? -1 : in.micro_batch + r * per_repeat;
          const StageTimes& t = stages[k];
          SimTask task{.resource = out.stage_resource[k], .micro_batch = mb};
          if (is_recv(in.op)) {
            const Op send = in.op == Op::RecvActivation ? Op::SendActivation : Op::SendGradient;
            const auto it = transfer.find({send, k, mb});
            if (it == transfer.end()) break;  // the neighbour has not reached its Send yet
            task.kind = TaskKind::recv;
            task.after = {it->second};
          } else if (is_send(in.op)) {
            const bool forward = in.op == Op::SendActivation;
            const int peer = forward ? k + 1 : k - 1;
            const int link = forward ? k : k - 1;
            const int64_t bytes = forward ? t.activation_bytes_out : t.gradient_bytes_out;
            SimTask send{.resource = forward ? link_forward[link] : link_backward[link],
                         .seconds = links[link].seconds(bytes),
                         .kind = TaskKind::send,
                         .micro_batch = mb,
                         .bytes = bytes};
            if (last[k] >= 0) send.after = {last[k]};
            transfer[{in.op, peer, mb}] = sim.add_task(std::move(send));
            ++pc[k];
            progress = true;
            continue;
          } else if (in.op == Op::Flush) {
            ++pc[k];
            progress = true;
            continue;
          } else if (in.op == Op::Forward) {
            task.kind = TaskKind::forward;
            task.seconds = t.forward_s;
            task.memory_pool = pool[k];
            task.allocate = t.kept_bytes_per_micro_batch;
          } else if (in.op == Op::Backward) {
            task.kind = TaskKind::backward;
            task.seconds = t.backward_s;
            task.memory_pool = pool[k];
            task.release = t.kept_bytes_per_micro_batch;
          } else {  // OptimizerStep
            task.kind = TaskKind::update;
            task.seconds = t.update_s;
          }
          task.processors = cpus;
          last[k] = sim.add_task(std::move(task));
          if (in.op == Op::OptimizerStep) updates[k].push_back(last[k]);
          ++pc[k];
          progress = true;
        }
      }
    }
    for (int k = 0; k < n; ++k)
      ONNXTRAIN_CHECK(pc[k] == schedule.programs[k].size(), "simulate_pipeline: the programs wait on each other");
  }
  sim.run();
  out.makespan = sim.makespan();
  out.step_end.assign(static_cast<size_t>(steps), 0);
  for (int k = 0; k < n; ++k) {
    ONNXTRAIN_CHECK(static_cast<int64_t>(updates[k].size()) == steps, "simulate_pipeline: one update per step");
    for (int64_t i = 0; i < steps; ++i)
      out.step_end[static_cast<size_t>(i)] =
          std::max(out.step_end[static_cast<size_t>(i)], sim.end(updates[k][static_cast<size_t>(i)]));
  }
  for (int k = 0; k < n; ++k) {
    StageSummary s;
    double previous_end = 0;
    for (int id : sim.tasks_of(out.stage_resource[k])) {
      const SimTask& t = sim.tasks()[static_cast<size_t>(id)];
      if (t.kind == TaskKind::recv) s.blocked_s += sim.start(id) - previous_end;
      previous_end = sim.end(id);
    }
    s.busy_s = sim.busy_seconds(out.stage_resource[k]);
    if (k + 1 < n) s.send_s += sim.busy_seconds(link_forward[k]);
    if (k > 0) s.send_s += sim.busy_seconds(link_backward[k - 1]);
    s.bubble_fraction = out.makespan > 0 ? 1 - s.busy_s / out.makespan : 0;
    s.peak_memory = sim.peak_memory(pool[k]);
    out.stages.push_back(s);
  }
  return out;
}

}  // namespace onnxtrain
