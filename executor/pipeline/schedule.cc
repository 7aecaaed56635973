#include "executor/pipeline/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "graph/error.h"
#include "simulator/pipeline_simulation.h"

namespace onnxtrain {

namespace {

// What each row means: schedule.h. The order of the CLI's listings (pipeline_strategy_names).
constexpr StrategyTraits kStrategies[] = {
    // 1F1B, each backward updates at once; every pass reads the weights as they are (stale gradients)
    {PipelineStrategy::naive, "naive", false, false, false, WeightHandling::current},
    // 1F1B, each backward updates at once; the backward reads the weights its forward stashed
    {PipelineStrategy::pipedream, "pipedream", false, false, false, WeightHandling::stash},
    // 1F1B, each backward updates at once; every pass reads the weights predicted for its version
    {PipelineStrategy::spectrain, "spectrain", false, false, false, WeightHandling::predict},
    // M micro-batches, all forwards then all backwards, one update per mini-batch
    {PipelineStrategy::gpipe, "gpipe", true, true, false, WeightHandling::current},
    // M micro-batches in 1F1B order (PipeDream-Flush), one update per mini-batch: gpipe's numbers, less memory
    {PipelineStrategy::flush_1f1b, "1f1b", true, false, false, WeightHandling::current},
    // M micro-batches per mini-batch in one 1F1B stream (PipeDream-2BW): summed gradients, updates one
    // version stale, two weight versions
    {PipelineStrategy::two_bw, "2bw", false, false, true, WeightHandling::stash},
};
constexpr SpecTrainTarget kTargets[] = {SpecTrainTarget::sequential, SpecTrainTarget::paper};

// naive, pipedream, spectrain, 2bw: one 1F1B program over the whole run, updates without a flush (gpipe
// and 1f1b repeat a flushing program per mini-batch).
bool streams_the_run(PipelineStrategy strategy) { return !strategy_traits(strategy).flushes; }

void emit_forward(std::vector<Instruction>& program, int stage, int stages, int64_t mb) {
  if (stage > 0) program.push_back({Op::RecvActivation, mb});
  program.push_back({Op::Forward, mb});
  if (stage + 1 < stages) program.push_back({Op::SendActivation, mb});
}

void emit_backward(std::vector<Instruction>& program, int stage, int stages, int64_t mb) {
  if (stage + 1 < stages) program.push_back({Op::RecvGradient, mb});
  program.push_back({Op::Backward, mb});
  if (stage > 0) program.push_back({Op::SendGradient, mb});
}

// 1F1B order; an OptimizerStep after every `step_every`-th backward (0: none, the caller flushes at the end).
std::vector<Instruction> one_f_one_b_program(int stage, int stages, int64_t count, int64_t step_every) {
  std::vector<Instruction> program;
  int64_t next_forward = 0, next_backward = 0;
  const int64_t warm_up = std::min<int64_t>(stages - 1 - stage, count);
  while (next_forward < warm_up) emit_forward(program, stage, stages, next_forward++);
  while (next_backward < count) {
    if (next_forward < count) emit_forward(program, stage, stages, next_forward++);
    emit_backward(program, stage, stages, next_backward);
    if (step_every > 0 && (next_backward + 1) % step_every == 0) program.push_back({Op::OptimizerStep, next_backward});
    ++next_backward;
  }
  return program;
}

std::vector<Instruction> flush_program(int stage, int stages, int64_t micro_batches, bool fill_drain) {
  std::vector<Instruction> program;
  if (fill_drain) {
    for (int64_t mb = 0; mb < micro_batches; ++mb) emit_forward(program, stage, stages, mb);
    for (int64_t mb = 0; mb < micro_batches; ++mb) emit_backward(program, stage, stages, mb);
  } else {
    program = one_f_one_b_program(stage, stages, micro_batches, 0);
  }
  program.push_back({Op::Flush, -1});
  program.push_back({Op::OptimizerStep, -1});
  return program;
}

int peer_of(const Instruction& in, int stage) {
  return in.op == Op::SendActivation || in.op == Op::RecvGradient ? stage + 1 : stage - 1;
}

// Every pass one time unit, transfers instant (the table's and the paper target's timeline). Per stage:
// the start of each Forward, Backward and OptimizerStep, in program order, with its kind and micro-batch.
struct UnitPass {
  TaskKind kind;
  int64_t micro_batch;
  int64_t start;
};
struct UnitTimeline {
  std::vector<std::vector<UnitPass>> passes;
  int64_t makespan = 0;
  std::vector<double> bubble;
};

UnitTimeline unit_timeline(const Schedule& schedule, double update_time) {
  const std::vector<StageTimes> times(schedule.stages,
                                      StageTimes{.forward_s = 1, .backward_s = 1, .update_s = update_time});
  const std::vector<LinkTimes> links(schedule.stages - 1);
  const PipelineSimulation p = simulate_pipeline(schedule, times, links);
  UnitTimeline out;
  out.makespan = std::llround(p.makespan);
  for (int k = 0; k < schedule.stages; ++k) {
    out.passes.emplace_back();
    for (int id : p.sim.tasks_of(p.stage_resource[k])) {
      const SimTask& t = p.sim.tasks()[static_cast<size_t>(id)];
      if (t.kind != TaskKind::recv) out.passes[k].push_back({t.kind, t.micro_batch, std::llround(p.sim.start(id))});
    }
    out.bubble.push_back(p.stages[k].bubble_fraction);
  }
  return out;
}

// The SpecTrain paper's target: the updates stage k has finished at the start of the slot (a forward half,
// then a backward half) in which stage 0 runs B_i, i.e. one pass time before B_i starts on stage 0. With
// unit pass times the as-soon-as-possible timeline puts every backward exactly on the paper's grid
// (F_i on stage k at 2i+k in steady state, B_i at 2i+2N-1-k), and the versions only change at backwards.
std::vector<std::vector<int64_t>> paper_targets(const Schedule& schedule) {
  const UnitTimeline timeline = unit_timeline(schedule, 0);
  std::vector<int64_t> slot_start(schedule.micro_batches, 0);
  for (const UnitPass& pass : timeline.passes[0])
    if (pass.kind == TaskKind::backward) slot_start[pass.micro_batch] = pass.start - 1;
  std::vector<std::vector<int64_t>> target(schedule.stages, std::vector<int64_t>(schedule.micro_batches, 0));
  for (int k = 0; k < schedule.stages; ++k)
    for (const UnitPass& pass : timeline.passes[k]) {
      if (pass.kind != TaskKind::update) continue;
      // An update is finished when its zero-length step starts; one landing exactly on a slot boundary
      // counts (the grid's half-slot offsets make such ties the rule, not the exception).
      for (int64_t i = 0; i < schedule.micro_batches; ++i)
        if (pass.start <= slot_start[i]) ++target[k][i];
    }
  return target;
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace

const StrategyTraits& strategy_traits(PipelineStrategy strategy) {
  for (const StrategyTraits& t : kStrategies)
    if (t.strategy == strategy) return t;
  throw Error("pipeline strategy " + std::to_string(static_cast<int>(strategy)) + " has no traits");
}

std::string pipeline_strategy_names() {
  std::string names;
  for (const StrategyTraits& t : kStrategies) names += std::string(names.empty() ? "" : " | ") + t.name;
  return names;
}

PipelineStrategy parse_pipeline_strategy(std::string_view name) {
  for (const StrategyTraits& t : kStrategies)
    if (name == t.name) return t.strategy;
  throw Error("unknown pipeline strategy '" + std::string(name) + "' (expected " + pipeline_strategy_names() + ")");
}

bool is_pipeline_strategy(std::string_view name) {
  for (const StrategyTraits& t : kStrategies)
    if (name == t.name) return true;
  return false;
}

const char* pipeline_strategy_name(PipelineStrategy strategy) { return strategy_traits(strategy).name; }

SpecTrainTarget parse_spectrain_target(std::string_view name) {
  for (SpecTrainTarget target : kTargets)
    if (name == spectrain_target_name(target)) return target;
  throw Error("unknown SpecTrain target '" + std::string(name) + "' (expected sequential or paper)");
}

const char* spectrain_target_name(SpecTrainTarget target) {
  return target == SpecTrainTarget::paper ? "paper" : "sequential";
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Forward:
      return "Forward";
    case Op::Backward:
      return "Backward";
    case Op::SendActivation:
      return "SendActivation";
    case Op::RecvActivation:
      return "RecvActivation";
    case Op::SendGradient:
      return "SendGradient";
    case Op::RecvGradient:
      return "RecvGradient";
    case Op::OptimizerStep:
      return "OptimizerStep";
    case Op::Flush:
      return "Flush";
  }
  return "?";
}

Schedule make_schedule(PipelineStrategy strategy, int stages, int64_t micro_batches, SpecTrainTarget target,
                       int64_t micro_per_update) {
  const StrategyTraits& traits = strategy_traits(strategy);
  if (stages < 1) throw Error("pipeline schedule: the number of stages must be >= 1, got " + std::to_string(stages));
  if (micro_batches < 1)
    throw Error(std::string("pipeline schedule: the number of ") +
                (streams_the_run(strategy) ? "mini-batches" : "micro-batches") + " must be >= 1, got " +
                std::to_string(micro_batches));
  if (!traits.accumulates) micro_per_update = 1;
  if (micro_per_update < 1 || micro_batches % micro_per_update != 0)
    throw Error("pipeline schedule: " + std::to_string(micro_batches) + " micro-batches are not whole updates of " +
                std::to_string(micro_per_update));
  Schedule schedule{.strategy = strategy,
                    .target = target,
                    .stages = stages,
                    .micro_batches = micro_batches,
                    .micro_per_update = micro_per_update};
  for (int k = 0; k < stages; ++k)
    schedule.programs.push_back(streams_the_run(strategy)
                                    ? one_f_one_b_program(k, stages, micro_batches, micro_per_update)
                                    : flush_program(k, stages, micro_batches, traits.fill_drain));

  // Versions: the optimizer steps a stage has taken before each pass, counted along its own program.
  const std::vector<int64_t> zeros(micro_batches, 0);
  schedule.forward_version.assign(stages, zeros);
  schedule.backward_version.assign(stages, zeros);
  for (int k = 0; k < stages; ++k) {
    int64_t steps = 0;
    for (const Instruction& in : schedule.programs[k]) {
      if (in.op == Op::OptimizerStep) ++steps;
      if (in.op == Op::Forward) schedule.forward_version[k][in.micro_batch] = steps;
      if (in.op == Op::Backward) schedule.backward_version[k][in.micro_batch] = steps;
    }
  }
  // Flushes: one version per mini-batch, which every micro-batch uses: the target is the version held.
  schedule.target_version.assign(stages, zeros);
  if (streams_the_run(strategy)) {
    if (target == SpecTrainTarget::paper && traits.weights == WeightHandling::predict) {
      schedule.target_version = paper_targets(schedule);
    } else {
      // W_i for mini-batch i (2bw: micro-batch i belongs to mini-batch i / M).
      for (int k = 0; k < stages; ++k)
        for (int64_t i = 0; i < micro_batches; ++i) schedule.target_version[k][i] = i / micro_per_update;
    }
  }
  schedule.s_forward.assign(stages, zeros);
  schedule.s_backward.assign(stages, zeros);
  for (int k = 0; k < stages; ++k)
    for (int64_t i = 0; i < micro_batches; ++i) {
      schedule.s_forward[k][i] = schedule.target_version[k][i] - schedule.forward_version[k][i];
      schedule.s_backward[k][i] = schedule.target_version[k][i] - schedule.backward_version[k][i];
    }
  return schedule;
}

std::vector<bool> launch_before(const Schedule& schedule, int stage) {
  const std::vector<Instruction>& program = schedule.programs.at(static_cast<size_t>(stage));
  // Where each transfer of the neighbours is in their programs, by (op, micro-batch).
  std::map<std::pair<int, std::pair<Op, int64_t>>, size_t> position;
  for (int peer : {stage - 1, stage + 1}) {
    if (peer < 0 || peer >= schedule.stages) continue;
    const std::vector<Instruction>& theirs = schedule.programs[static_cast<size_t>(peer)];
    for (size_t j = 0; j < theirs.size(); ++j) position[{peer, {theirs[j].op, theirs[j].micro_batch}}] = j;
  }
  // The peer's instruction that matches `in` (a Send's Recv, a Recv's Send).
  auto matching = [&](const Instruction& in) {
    static const std::map<Op, Op> kMatch = {{Op::SendActivation, Op::RecvActivation},
                                            {Op::RecvActivation, Op::SendActivation},
                                            {Op::SendGradient, Op::RecvGradient},
                                            {Op::RecvGradient, Op::SendGradient}};
    const int peer = peer_of(in, stage);
    const auto it = position.find({peer, {kMatch.at(in.op), in.micro_batch}});
    ONNXTRAIN_CHECK(it != position.end(), "schedule: stage " + std::to_string(peer) + " has no match for stage " +
                                              std::to_string(stage) + "'s " + op_name(in.op) + " " +
                                              std::to_string(in.micro_batch));
    return it->second;
  };
  std::vector<bool> launch(program.size(), false);
  size_t first_queued = 0;  // the run of transfers since the last other instruction
  for (size_t j = 0; j < program.size(); ++j) {
    const Instruction& in = program[j];
    if (!is_transfer(in.op)) {
      first_queued = j + 1;
      continue;
    }
    if (!is_recv(in.op)) continue;
    const size_t header_sent = matching(in);
    for (size_t q = first_queued; q < j; ++q) {
      const Instruction& queued = program[q];
      // The peer may have to finish that transfer before it reaches the send (launching it early is safe
      // then: the crossing that needs one group has the peer's send first).
      if (peer_of(queued, stage) == peer_of(in, stage) && matching(queued) < header_sent) {
        launch[j] = true;
        first_queued = j;  // what was queued is launched; this recv starts the next group
        break;
      }
    }
  }
  return launch;
}

std::string format_schedule_table(const Schedule& schedule) {
  const bool one_f_one_b = streams_the_run(schedule.strategy);
  // GPipe's update is drawn one unit wide so the flush shows; 1F1B's follow their backward at once.
  const UnitTimeline timeline = unit_timeline(schedule, one_f_one_b ? 0 : 1);
  std::vector<std::vector<std::string>> grid(schedule.stages, std::vector<std::string>(timeline.makespan, "."));
  size_t width = 2;
  for (int k = 0; k < schedule.stages; ++k)
    for (const UnitPass& pass : timeline.passes[k]) {
      std::string label;
      if (pass.kind == TaskKind::forward) label = "F" + std::to_string(pass.micro_batch);
      if (pass.kind == TaskKind::backward) label = "B" + std::to_string(pass.micro_batch);
      if (pass.kind == TaskKind::update && !one_f_one_b) label = "U";
      if (label.empty()) continue;
      grid[k][pass.start] = label;
      width = std::max(width, label.size());
    }
  width = std::max(width, std::to_string(std::max<int64_t>(timeline.makespan - 1, 0)).size());
  const bool accumulates = schedule.micro_per_update > 1;  // 2bw: M micro-batches per update
  const std::string unit = one_f_one_b && !accumulates ? "mini-batch" : "micro-batch";

  std::ostringstream out;
  out << pipeline_strategy_name(schedule.strategy) << " schedule: " << schedule.stages << " stage"
      << (schedule.stages == 1 ? "" : "s") << ", " << schedule.micro_batches << " " << unit
      << (schedule.micro_batches == 1 ? "" : "es")
      << (accumulates   ? " in the run (1F1B), an update per " + std::to_string(schedule.micro_per_update) + "\n"
          : one_f_one_b ? std::string(" in the run (1F1B)\n")
          : strategy_traits(schedule.strategy).fill_drain
              ? std::string(" per mini-batch (all forwards, all backwards, one update)\n")
              : std::string(" per mini-batch (1F1B order, one update)\n"));
  out << "Fi forward of " << unit << " i, Bi its backward"
      << (accumulates
              ? " (after each " + std::to_string(schedule.micro_per_update) + " of them, the stage's optimizer step)"
          : one_f_one_b ? std::string(" then the stage's optimizer step")
                        : std::string(", U the optimizer step (flush)"))
      << ", . idle; one column per pass time\n";
  const size_t label_width =
      std::max(("stage " + std::to_string(schedule.stages - 1)).size(), std::string(one_f_one_b ? unit : "").size());
  auto row = [&](const std::string& name, const std::vector<std::string>& cells, size_t cell_width) {
    std::string line = pad(name, label_width + 2);
    for (size_t c = 0; c < cells.size(); ++c) line += pad(cells[c], c + 1 < cells.size() ? cell_width + 1 : 0);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  std::vector<std::string> header;
  for (int64_t t = 0; t < timeline.makespan; ++t) header.push_back(std::to_string(t));
  row("time", header, width);
  for (int k = 0; k < schedule.stages; ++k) row("stage " + std::to_string(k), grid[k], width);

  if (one_f_one_b) {
    // Two numbers per pass, "forward/backward", one column per mini-batch.
    auto table = [&](const std::string& title, const std::vector<std::vector<int64_t>>& forward,
                     const std::vector<std::vector<int64_t>>& backward) {
      std::vector<std::vector<std::string>> cells(schedule.stages);
      std::vector<std::string> mbs;
      size_t cell_width = 1;
      for (int64_t i = 0; i < schedule.micro_batches; ++i) {
        mbs.push_back(std::to_string(i));
        cell_width = std::max(cell_width, mbs.back().size());
        for (int k = 0; k < schedule.stages; ++k) {
          cells[k].push_back(std::to_string(forward[k][i]) + "/" + std::to_string(backward[k][i]));
          cell_width = std::max(cell_width, cells[k].back().size());
        }
      }
      out << title << "\n";
      row(unit, mbs, cell_width);
      for (int k = 0; k < schedule.stages; ++k) row("stage " + std::to_string(k), cells[k], cell_width);
    };
    table("weights used, forward/backward (updates the stage made before the pass; sequential SGD uses i):",
          schedule.forward_version, schedule.backward_version);
    if (schedule.strategy == PipelineStrategy::spectrain)
      table(std::string("SpecTrain s = target - used, forward/backward (") + spectrain_target_name(schedule.target) +
                " target):",
            schedule.s_forward, schedule.s_backward);
  }
  // The bubble of the passes alone (updates take no time), GPipe's (N-1)/(M+N-1) included.
  out << "bubble (every pass one time unit):";
  const std::vector<double> bubble = unit_timeline(schedule, 0).bubble;
  for (int k = 0; k < schedule.stages; ++k) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, " stage %d %.0f%%%s", k, 100.0 * bubble[k],
                  k + 1 < schedule.stages ? "," : "");
    out << buffer;
  }
  out << "\n";
  return out.str();
}

}  // namespace onnxtrain
