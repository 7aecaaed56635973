#include "simulator/strategy_simulation.h"

#include <algorithm>
#include <cstdio>

#include "executor/pipeline/schedule.h"
#include "graph/error.h"
#include "simulator/pipeline_simulation.h"
#include "simulator/replica_simulation.h"

namespace onnxtrain {
namespace {

LinkTimes times_of(const LinkDescription& link) { return {.bandwidth = link.bandwidth, .latency_s = link.latency_s}; }

struct ProfileSums {
  double forward_s = 0, backward_s = 0;
  int64_t parameter_bytes = 0, state_bytes = 0, activation_bytes = 0;
};

ProfileSums sums_of(const CostProfile& profile) {
  ProfileSums s;
  for (const NodeCost& n : profile.nodes) {
    s.forward_s += n.forward_seconds;
    s.backward_s += n.backward_seconds;
    s.parameter_bytes += n.parameter_bytes;
    s.state_bytes += n.state_bytes;
    s.activation_bytes += n.activation_bytes;
  }
  return s;
}

double update_seconds(int64_t parameter_bytes, const Machine& machine, const SimulationSettings& settings) {
  const DeviceDescription& d = machine.device;
  return settings.update_passes * static_cast<double>(parameter_bytes) / (d.memory_bandwidth * d.memory_efficiency);
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f%%", 100 * fraction);
  return text;
}

// What a run is limited by, from the fractions of the makespan its devices and its busiest
// communication resource were busy (see the header).
std::string limit_of(double busy, const std::string& comm_name, double comm_busy, int64_t micro_batch) {
  if (busy >= 0.8)
    return "compute (devices busy " + percent(busy) + ", " + std::to_string(micro_batch) + " rows a pass)";
  if (!comm_name.empty() && comm_busy >= 0.5 * (1 - busy))
    return comm_name + " (busy " + percent(comm_busy) + " of the time)";
  return "the bubble (devices idle " + percent(1 - busy) + ": fill, drain, uneven stages)";
}

// The steady-state window the rate is measured over: from the end of the last step left out at the start
// to the end of the last step kept.
struct Window {
  double from = 0, to = 0;
  double length() const { return to - from; }
};

Window window_of(const std::vector<double>& step_end, const SimulationSettings& settings) {
  const int64_t n = static_cast<int64_t>(step_end.size());
  const int64_t first = std::clamp<int64_t>(settings.warmup, 0, n - 1);
  const int64_t last = std::clamp<int64_t>(n - 1 - settings.cooldown, first, n - 1);
  return {first == 0 ? 0.0 : step_end[static_cast<size_t>(first - 1)], step_end[static_cast<size_t>(last)]};
}

// The busiest resource that is not a device, in words.
void busiest_comm(const EventSimulation& sim, const std::vector<int>& devices, const Window& w, std::string& name,
                  double& busy) {
  for (size_t r = 0; r < sim.resource_names().size(); ++r) {
    if (std::find(devices.begin(), devices.end(), static_cast<int>(r)) != devices.end()) continue;
    const double b = w.length() > 0 ? sim.busy_between(static_cast<int>(r), w.from, w.to) / w.length() : 0;
    if (b > busy) {
      busy = b;
      name = sim.resource_names()[r];
    }
  }
  if (name.starts_with("all-reduce"))
    name = "the all-reduce";
  else if (name.starts_with("link"))
    name = "the transfers on " + name;
  else if (name.starts_with("shard"))
    name = "the parameter servers' updates (" + name + ")";
  else if (name.starts_with("host link"))
    name = "the weights and gradients on the host links";
  else if (name == "storage")
    name = "the central storage's update";
}

// Device figures over the steady-state window; blocked time and memory over the whole run.
void finish(StrategySimulation& out, const EventSimulation& sim, const std::vector<int>& devices,
            const std::vector<int64_t>& peaks, const std::vector<double>& blocked, const std::vector<double>& step_end,
            const Machine& machine, const SimulationSettings& settings, int64_t micro_batch) {
  const Window w = window_of(step_end, settings);
  const double rate_per_step = rate_between(step_end, settings.warmup, settings.cooldown);
  double busy_sum = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    WorkerFigures f;
    f.name = sim.resource_names()[static_cast<size_t>(devices[i])];
    f.busy_fraction = w.length() > 0 ? sim.busy_between(devices[i], w.from, w.to) / w.length() : 0;
    f.blocked_fraction = sim.makespan() > 0 ? blocked[i] / sim.makespan() : 0;
    f.peak_memory = peaks[i];
    busy_sum += f.busy_fraction;
    out.peak_memory = std::max(out.peak_memory, peaks[i]);
    out.workers.push_back(f);
  }
  const double busy = devices.empty() ? 0 : busy_sum / static_cast<double>(devices.size());
  std::string comm_name;
  double comm_busy = 0;
  busiest_comm(sim, devices, w, comm_name, comm_busy);
  for (WorkerFigures& f : out.workers) f.comm_seconds_per_step = rate_per_step > 0 ? comm_busy / rate_per_step : 0;
  out.bubble_fraction = 1 - busy;
  out.samples_per_s = rate_per_step * static_cast<double>(settings.batch);
  out.step_seconds = rate_per_step > 0 ? 1 / rate_per_step : 0;
  out.fits_memory = out.peak_memory <= static_cast<int64_t>(machine.device.memory_bytes);
  out.limited_by = out.fits_memory ? limit_of(busy, comm_name, comm_busy, micro_batch)
                                   : "memory (needs " + format_megabytes(out.peak_memory) + " of the device's " +
                                         format_megabytes(static_cast<int64_t>(machine.device.memory_bytes)) + ")";
}

// finish() from the per-device summaries (WorkerSummary or StageSummary), keeping the timeline.
template <typename Summary>
void conclude(StrategySimulation& out, EventSimulation&& sim, const std::vector<Summary>& summaries,
              const std::vector<int>& devices, const std::vector<double>& step_end, const Machine& machine,
              const SimulationSettings& settings, int64_t micro_batch) {
  std::vector<int64_t> peaks;
  std::vector<double> blocked;
  for (const Summary& summary : summaries) {
    peaks.push_back(summary.peak_memory);
    blocked.push_back(summary.blocked_s);
  }
  finish(out, sim, devices, peaks, blocked, step_end, machine, settings, micro_batch);
  out.sim = std::make_shared<EventSimulation>(std::move(sim));
}

StrategySimulation simulate_replicas(const StrategySpec& s, const Machine& machine, const ProfileAt& profiles,
                                     const SimulationSettings& settings) {
  const bool ps = s.kind == "ps";
  const int workers = s.kind == "single" ? 1 : s.workers;
  const int64_t micro = ps ? settings.batch : (settings.batch + workers - 1) / workers;
  const ProfileSums sums = sums_of(profiles(micro, workers));
  ReplicaTimes t{.forward_s = sums.forward_s,
                 .backward_s = sums.backward_s,
                 .update_s = update_seconds(sums.parameter_bytes, machine, settings),
                 .parameter_bytes = sums.parameter_bytes,
                 .activation_bytes = sums.activation_bytes};
  const int64_t p = sums.parameter_bytes;
  const bool host_state = s.kind == "cs" || ps;  // the optimizer state lives on the host
  t.resident_bytes = p * (host_state ? 2 : 2 + settings.optimizer_slots) + sums.state_bytes;
  if (s.kind == "dp" && settings.host_executor && workers > 1) {
    // onnxtrain's replica threads share one copy of the weights: after the backward each sums its share of
    // every gradient over all replicas and updates that share (ReplicaGradientSum::step_share), all at once.
    // One pass over every replica's gradient and the update's other passes, at the memory bandwidth of all
    // the threads; no ring, no update of its own.
    t.sharded_exchange_s =
        update_seconds(p, machine, settings) + (workers - 1) * update_seconds(p, machine, {.update_passes = 1});
  }
  ReplicaSimulation r;
  if (s.kind == "single" || s.kind == "dp") {
    r = simulate_data_parallel(t, workers, times_of(machine.ring_link(workers)), settings.steps, settings.dp_buckets);
  } else if (s.kind == "cs") {
    r = simulate_central_storage(t, workers, times_of(machine.host), settings.steps);
  } else {
    const int64_t per_worker = (settings.steps + workers - 1) / workers;  // each worker its share, rounded up
    r = simulate_parameter_server(t, workers, s.servers, times_of(machine.host), per_worker);
  }
  StrategySimulation out{.strategy = s};
  conclude(out, std::move(r.sim), r.workers, r.worker_resource, r.step_end, machine, settings, micro);
  return out;
}

StrategySimulation simulate_pipeline_strategy(const StrategySpec& s, const Machine& machine, const ProfileAt& profiles,
                                              const SimulationSettings& settings) {
  const PipelineStrategy strategy = parse_pipeline_strategy(s.kind);
  const bool gpipe = strategy_traits(strategy).flushes;  // gpipe, 1f1b: the programs repeat per mini-batch
  const int64_t per_update = strategy_traits(strategy).accumulates ? s.micro_batches : 1;  // 2bw's M
  // A hybrid is R copies of the pipeline, each on B/R rows (gpipe, 1f1b, 2bw: in M micro-batches), whose
  // stage k replicas all-reduce their gradients before every update.
  const int64_t rows = (settings.batch + s.replicas - 1) / s.replicas;
  const int64_t micro = gpipe || per_update > 1 ? (rows + s.micro_batches - 1) / s.micro_batches : rows;
  const CostProfile& profile = profiles(micro, s.devices());
  if (static_cast<int64_t>(profile.nodes.size()) < s.workers)
    throw Error("simulate " + s.spec + ": the model has " + std::to_string(profile.nodes.size()) +
                " nodes, fewer than " + std::to_string(s.workers) + " stages");
  PlanOptions o;
  o.stages = s.workers;
  o.schedule = strategy;
  o.micro_batches = gpipe || per_update > 1 ? s.micro_batches : settings.steps;
  const LinkDescription& between = machine.link(0, s.replicas);
  o.link = {between.name, between.bandwidth, between.latency_s};
  o.optimizer_slots = settings.optimizer_slots;
  o.gradients_into_sum = o.update_writes_working = settings.host_executor;
  const Plan plan = plan_pipeline(profile, o);
  std::vector<StageTimes> times = plan_stage_times(profile, plan);
  // Stage k's copies sit on devices k, N+k, 2N+k, ...: their ring crosses nodes when the copies do.
  const LinkTimes ring = times_of(machine.ring_link(s.devices() > machine.devices_per_node ? s.devices() : s.replicas));
  // The update on this machine: the deferred weight-gradient products as profiled, then the all-reduce and
  // the optimizer's passes at the machine's bandwidth. (Before, the products went missing here: 5.85 ms a
  // step of ResNet-18's last stage under gpipe:2x4 on a 2-core host.)
  for (size_t k = 0; k < times.size(); ++k) {
    const int64_t p = plan.stages[k].parameter_bytes;
    const double mirror = settings.host_executor ? update_seconds(p, machine, {.update_passes = 1}) : 0.0;
    times[k].update_s = times[k].deferred_products_s + ring_allreduce_seconds(p, s.replicas, ring) +
                        update_seconds(p, machine, settings) + mirror;
  }
  std::vector<LinkTimes> links;
  for (int k = 0; k + 1 < s.workers; ++k) links.push_back(times_of(machine.link(k, k + 1)));
  const Schedule schedule =
      gpipe ? make_schedule(strategy, s.workers, s.micro_batches)
            : make_schedule(strategy, s.workers, settings.steps * per_update, SpecTrainTarget::sequential, per_update);
  PipelineSimulation p = simulate_pipeline(schedule, times, links, gpipe ? settings.steps : 1, settings.processors);
  StrategySimulation out{.strategy = s, .plan = plan};
  conclude(out, std::move(p.sim), p.stages, p.stage_resource, p.step_end, machine, settings, micro);
  return out;
}

}  // namespace

std::string format_megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes < 10'000'000 ? "%.1f MB" : "%.0f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

CpuShare cpu_share(const StrategySpec& strategy, int threads) {
  const int devices = std::max(strategy.devices(), 1);
  CpuShare share{.per_worker = std::max(1, threads / devices)};
  share.at_once = std::min(devices, std::max(1, threads / share.per_worker));
  if (!strategy.is_pipeline()) share.time_shared = static_cast<double>(devices) / share.at_once;
  return share;
}

double optimizer_update_passes(const std::string& optimizer) {
  if (optimizer == "sgd") return 3;
  if (optimizer == "momentum" || optimizer == "nesterov" || optimizer == "adagrad") return 5;
  if (optimizer == "adam" || optimizer == "adamw") return 7;
  throw Error("unknown --optimizer '" + optimizer + "' (sgd, momentum, nesterov, adam, adamw, adagrad)");
}

int optimizer_state_slots(const std::string& optimizer) {
  if (optimizer == "sgd") return 0;
  if (optimizer == "momentum" || optimizer == "nesterov" || optimizer == "adagrad") return 1;
  if (optimizer == "adam" || optimizer == "adamw") return 2;
  throw Error("unknown --optimizer '" + optimizer + "' (sgd, momentum, nesterov, adam, adamw, adagrad)");
}

StrategySimulation simulate_strategy(const StrategySpec& strategy, const Machine& machine, const ProfileAt& profiles,
                                     const SimulationSettings& settings) {
  if (strategy.devices() > machine.devices())
    throw Error("simulate " + strategy.spec + ": needs " + std::to_string(strategy.devices()) + " devices, and " +
                machine.name + " has " + std::to_string(machine.devices()));
  if (settings.batch < 1 || settings.warmup < 0 || settings.cooldown < 0 ||
      settings.warmup + settings.cooldown >= settings.steps)
    throw Error("simulate: needs batch >= 1 and more steps than the warm-up and cool-down steps left out");
  return strategy.is_pipeline() ? simulate_pipeline_strategy(strategy, machine, profiles, settings)
                                : simulate_replicas(strategy, machine, profiles, settings);
}

}  // namespace onnxtrain
