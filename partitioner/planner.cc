#include "partitioner/planner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "executor/pipeline/schedule.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

std::string describe_model(const CostProfile& p) { return p.model.empty() ? "the model" : "model '" + p.model + "'"; }

// Prefix sums so that a stage's figures cost O(1) in the DP. The DP, evaluate_split and price_stage all
// price through this one class, so the DP and a brute force over evaluate_split see bit-identical
// numbers. long double keeps the rounding of differences of prefix sums below double's precision.
class StagePricer {
 public:
  StagePricer(const CostProfile& profile, const PlanOptions& options) : profile_(profile), options_(options) {
    const size_t n = profile.nodes.size();
    seconds_.assign(n + 1, 0);
    sum_ends_.assign(n + 1, 0);
    flops_.assign(n + 1, 0);
    params_.assign(n + 1, 0);
    state_.assign(n + 1, 0);
    activations_.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      const NodeCost& c = profile.nodes[i];
      seconds_[i + 1] = seconds_[i] + (static_cast<long double>(c.forward_seconds) + c.backward_seconds);
      sum_ends_[i + 1] = sum_ends_[i] + c.sum_end_seconds;
      flops_[i + 1] = flops_[i] + (static_cast<long double>(c.forward_flops) + c.backward_flops);
      params_[i + 1] = params_[i] + c.parameter_bytes;
      state_[i + 1] = state_[i] + c.state_bytes;
      activations_[i + 1] = activations_[i] + c.activation_bytes;
    }
    allreduce_link_ = options.allreduce_link.bandwidth > 0 ? options.allreduce_link : options.link;
  }

  int stages() const { return options_.stages; }
  int64_t nodes() const { return static_cast<int64_t>(profile_.nodes.size()); }

  int replicas(int k) const {
    if (options_.replicas.empty()) return 1;
    return options_.replicas.size() == 1 ? options_.replicas[0] : options_.replicas[static_cast<size_t>(k)];
  }

  const StrategyTraits& traits() const { return strategy_traits(options_.schedule); }
  // One update from M micro-batches' summed gradients (a flush, or 2bw's accumulation).
  bool flushes() const { return traits().flushes || traits().accumulates; }
  // Copies of the weights stage k keeps (the header comment's versions_k): master and working, plus
  // one stash per mini-batch in flight (pipedream) or per distinct version in flight (2bw), or the
  // prediction's scoring copies (spectrain with prediction_metrics).
  int weight_versions(int k) const {
    const int n = options_.stages;
    if (n == 1) return 1;
    const int64_t in_flight = n - k;
    switch (traits().weights) {
      case WeightHandling::current:
        return 2;
      case WeightHandling::predict:
        return 2 + (options_.prediction_metrics ? 2 * (n - k - 1) : 0);
      case WeightHandling::stash: {
        // pipedream copies a version only when an update comes while a pass still reads it
        // (WeightPolicy's lazy stash): the newest of the N−k mini-batches in flight reads the master.
        if (!traits().accumulates) return 1 + static_cast<int>(in_flight);
        const int64_t m = options_.micro_batches;
        return 2 + static_cast<int>(std::min<int64_t>(in_flight, (in_flight + m - 1) / m + 1));
      }
    }
    return 1;
  }
  // Micro-batches whose activations stage k holds at its peak.
  int64_t in_flight(int k) const {
    if (traits().fill_drain) return options_.micro_batches;
    if (traits().flushes) return std::min<int64_t>(options_.stages - k, options_.micro_batches);
    return options_.stages - k;
  }

  double transfer(int64_t bytes, const PlanLink& link) const {
    return bytes > 0 ? link.latency_s + static_cast<double>(bytes) / link.bandwidth : 0.0;
  }

  double time(int k, int64_t first, int64_t end, int r) const {
    const double compute = static_cast<double>(seconds_[end] - seconds_[first]);
    const double sends = send_forward(k, end) + send_backward(k, first);
    return (compute + sends + prediction(k, first, end)) / r +
           (allreduce(first, end, r) + update(first, end)) / (static_cast<double>(r) * updates_every());
  }
  // U: micro-batches per weight update (per replica): M where a flush or accumulation sums them, else 1.
  int64_t updates_every() const { return flushes() ? options_.micro_batches : 1; }
  // The stage's optimizer step over its parameters: memory-bound, reading the weights, gradients and state
  // and writing the weights and state (momentum SGD: 5 passes, as the simulator's update_passes), and the
  // working weights where the executor mirrors them; after a flush's sum, first the weight-gradient
  // products its nodes deferred to it (NodeCost::sum_end_seconds).
  double update(int64_t first, int64_t end) const {
    return deferred_products(first, end) +
           passes_over_weights(3.0 + 2.0 * options_.optimizer_slots + (options_.update_writes_working ? 1.0 : 0.0),
                               first, end);
  }
  // The weight-gradient products that nodes [first, end) deferred to the end of a flush's sum.
  double deferred_products(int64_t first, int64_t end) const {
    return flushes() ? static_cast<double>(sum_ends_[end] - sum_ends_[first]) : 0.0;
  }
  // SpecTrain, per micro-batch on every stage but the last (whose s is 0): the forward's predicted weights
  // (W and the velocity read, the prediction written: 3 passes over the stage's parameters) and W put back
  // for the backward (2; its s is 0 under the sequential target); with prediction_metrics the copies of Ŵ
  // and W kept for scoring (4) and the scoring's reads of them and of W_t (3). WeightPolicy::predict.
  double prediction(int k, int64_t first, int64_t end) const {
    if (traits().weights != WeightHandling::predict || k + 1 >= options_.stages) return 0.0;
    return passes_over_weights(5.0 + (options_.prediction_metrics ? 7.0 : 0.0), first, end);
  }
  // `passes` streams over the parameters of nodes [first, end) at the memory bandwidth (0 when unknown).
  double passes_over_weights(double passes, int64_t first, int64_t end) const {
    if (profile_.memory_bandwidth <= 0) return 0.0;
    return passes * static_cast<double>(params_[end] - params_[first]) / profile_.memory_bandwidth;
  }
  double send_forward(int k, int64_t end) const {
    return k + 1 < options_.stages ? transfer(profile_.cut_activation_bytes[end], options_.link) : 0.0;
  }
  double send_backward(int k, int64_t first) const {
    return k > 0 ? transfer(profile_.cut_gradient_bytes[first], options_.link) : 0.0;
  }
  double allreduce(int64_t first, int64_t end, int r) const {
    if (r <= 1) return 0.0;
    const double bytes = static_cast<double>(params_[end] - params_[first]);
    return 2.0 * (r - 1) * allreduce_link_.latency_s + 2.0 * (r - 1) / r * bytes / allreduce_link_.bandwidth;
  }

  StageMemory memory(int k, int64_t first, int64_t end) const {
    StageMemory m;
    const int64_t p = params_[end] - params_[first];
    m.weights = p;
    m.stashed_weights = p * (weight_versions(k) - 1);
    m.gradients = p * (flushes() && options_.stages > 1 && !options_.gradients_into_sum ? 2 : 1);
    const bool average =
        traits().weights == WeightHandling::predict && options_.prediction_average && options_.stages > 1;
    m.optimizer_state = p * (options_.optimizer_slots + (average ? 1 : 0));
    m.state = state_[end] - state_[first];
    const int64_t received = k > 0 ? profile_.cut_activation_bytes[first] : 0;
    const int64_t sent = k + 1 < options_.stages ? profile_.cut_activation_bytes[end] : 0;
    const int64_t kept = activations_[end] - activations_[first] + kept_from_before(first, end);
    m.activations = kept * in_flight(k);
    // At the receive of micro-batch i, i's received tensors with the kept values of the others in flight;
    // after its forward, all in flight kept and i's outgoing tensors. The larger is the peak.
    m.in_transit = std::max<int64_t>({sent, received - kept, 0});
    m.total = m.weights + m.stashed_weights + m.gradients + m.optimizer_state + m.state + m.activations + m.in_transit;
    return m;
  }
  int64_t memory_total(int k, int64_t first, int64_t end) const { return memory(k, first, end).total; }
  // Values an earlier node's backward reads first that a backward of this stage reads too: the stage keeps
  // the copy it received.
  int64_t kept_from_before(int64_t first, int64_t end) const {
    int64_t bytes = 0;
    for (const SharedKeptValue& v : profile_.shared_kept) {
      if (v.readers.front() >= static_cast<size_t>(first)) continue;
      const auto later = std::lower_bound(v.readers.begin(), v.readers.end(), static_cast<size_t>(first));
      if (later != v.readers.end() && *later < static_cast<size_t>(end)) bytes += v.bytes;
    }
    return bytes;
  }

  double flops(int64_t first, int64_t end) const { return static_cast<double>(flops_[end] - flops_[first]); }
  double compute(int64_t first, int64_t end) const { return static_cast<double>(seconds_[end] - seconds_[first]); }
  int64_t parameters(int64_t first, int64_t end) const { return params_[end] - params_[first]; }

 private:
  const CostProfile& profile_;
  const PlanOptions& options_;
  PlanLink allreduce_link_;
  std::vector<long double> seconds_, sum_ends_, flops_;
  std::vector<int64_t> params_, state_, activations_;
};

void validate(const CostProfile& profile, const PlanOptions& o) {
  const int64_t n = static_cast<int64_t>(profile.nodes.size());
  if (o.stages < 1) throw Error("the number of stages must be at least 1, got " + std::to_string(o.stages));
  if (n == 0) throw Error(describe_model(profile) + " has no nodes to place on stages");
  if (n < o.stages)
    throw Error(describe_model(profile) + " has " + std::to_string(n) + " node" + (n == 1 ? "" : "s") +
                ", fewer than the " + std::to_string(o.stages) +
                " stages asked for: every stage needs at least one node");
  const size_t cuts = static_cast<size_t>(n) + 1;
  ONNXTRAIN_CHECK(profile.cut_activation_bytes.size() == cuts && profile.cut_gradient_bytes.size() == cuts,
                  "cost profile: cut_*_bytes need n+1 entries");
  if (o.replicas.size() > 1 && o.replicas.size() != static_cast<size_t>(o.stages))
    throw Error("replicas: give one count for every stage or " + std::to_string(o.stages) + " counts, got " +
                std::to_string(o.replicas.size()));
  bool replicated = o.devices > o.stages;
  if (o.devices != 0 && o.devices < o.stages)
    throw Error("devices: " + std::to_string(o.stages) + " stages need at least " + std::to_string(o.stages) +
                " devices, got " + std::to_string(o.devices));
  if (o.devices != 0 && !o.replicas.empty())
    throw Error("give per-stage replica counts or a number of devices to spread the stages over, not both");
  for (int r : o.replicas) {
    if (r < 1) throw Error("replicas: every stage needs at least 1 replica, got " + std::to_string(r));
    replicated |= r > 1;
  }
  if (o.micro_batches < 1) throw Error("micro-batches must be at least 1, got " + std::to_string(o.micro_batches));
  if (o.optimizer_slots < 0) throw Error("optimizer slots must be >= 0");
  if (o.memory_cap < 0) throw Error("memory cap must be >= 0 bytes (0: no cap)");
  auto check_link = [](const PlanLink& l, const char* what) {
    if (!(l.bandwidth > 0) || !std::isfinite(l.bandwidth))
      throw Error(std::string(what) + " needs a bandwidth > 0 bytes/s" + (l.name.empty() ? "" : " ('" + l.name + "')"));
    if (!(l.latency_s >= 0) || !std::isfinite(l.latency_s))
      throw Error(std::string(what) + " needs a latency >= 0 s" + (l.name.empty() ? "" : " ('" + l.name + "')"));
  };
  if (o.stages > 1) check_link(o.link, "the link between stages");
  if (replicated) check_link(o.allreduce_link.bandwidth > 0 ? o.allreduce_link : o.link, "the all-reduce link");
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld bytes (%.3f GiB)", static_cast<long long>(bytes),
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// The DP over splits (and, with options.devices, replica counts). Stage k−1 over nodes [i, j) on r
// replicas costs cost(k−1, i, j, r); `combine` folds it into the best value of the stages before it
// (max for a bottleneck, + for a total); `allowed` filters stages (memory cap, time bound, a user
// split). Returns false if no split is allowed. Ties keep the earliest start of the last stage and the
// fewest devices, recursively.
template <typename T>
struct Solution {
  T value{};
  std::vector<int64_t> cuts;
  std::vector<int> replicas;
};

template <typename T, typename Cost, typename Allowed, typename Combine>
bool solve(const StagePricer& pricer, const PlanOptions& o, Cost cost, Allowed allowed, Combine combine,
           Solution<T>& out) {
  const int64_t n = pricer.nodes();
  const int stages = o.stages;
  const int devices = o.devices;  // 0: fixed replica counts, which use no budget
  const size_t width = static_cast<size_t>(devices) + 1;
  auto at = [&](int k, int64_t j, int d) { return (static_cast<size_t>(k) * (n + 1) + j) * width + d; };
  struct From {
    int64_t i = -1;
    int d = 0, r = 0;
  };
  const size_t states = static_cast<size_t>(stages + 1) * (n + 1) * width;
  std::vector<T> best(states);
  std::vector<From> from(states);
  std::vector<char> reachable(states, 0);
  reachable[at(0, 0, 0)] = 1;
  for (int k = 1; k <= stages; ++k) {
    // Stage k−1 ends at j; the stages after it need one node (and one device) each.
    for (int64_t j = k; j <= n - (stages - k); ++j) {
      for (int64_t i = k - 1; i < j; ++i) {
        for (int d0 = 0; d0 < static_cast<int>(width); ++d0) {
          if (!reachable[at(k - 1, i, d0)]) continue;
          const int r_lo = devices ? 1 : pricer.replicas(k - 1);
          const int r_hi = devices ? devices - d0 - (stages - k) : r_lo;
          for (int r = r_lo; r <= r_hi; ++r) {
            if (!allowed(k - 1, i, j, r)) continue;
            const int d = devices ? d0 + r : 0;
            const T v = combine(best[at(k - 1, i, d0)], cost(k - 1, i, j, r), k == 1);
            const size_t s = at(k, j, d);
            if (!reachable[s] || v < best[s]) {
              best[s] = v;
              from[s] = {i, d0, r};
              reachable[s] = 1;
            }
          }
        }
      }
    }
  }
  int d_end = -1;
  for (int d = 0; d < static_cast<int>(width); ++d)
    if (reachable[at(stages, n, d)] && (d_end < 0 || best[at(stages, n, d)] < best[at(stages, n, d_end)])) d_end = d;
  if (d_end < 0) return false;
  out.value = best[at(stages, n, d_end)];
  out.cuts.assign(static_cast<size_t>(stages) - 1, 0);
  out.replicas.assign(static_cast<size_t>(stages), 0);
  int64_t j = n;
  int d = d_end;
  for (int k = stages; k >= 1; --k) {
    const From f = from[at(k, j, d)];
    out.replicas[static_cast<size_t>(k) - 1] = f.r;
    if (k > 1) out.cuts[static_cast<size_t>(k) - 2] = f.i;
    j = f.i;
    d = f.d;
  }
  return true;
}

}  // namespace

std::vector<StageTimes> plan_stage_times(const CostProfile& profile, const Plan& plan) {
  const StagePricer pricer(profile, plan.options);
  std::vector<StageTimes> times;
  for (const StagePlan& s : plan.stages) {
    StageTimes t;
    for (int64_t i = s.first_node; i < s.end_node; ++i) {
      t.forward_s += profile.nodes[static_cast<size_t>(i)].forward_seconds;
      t.backward_s += profile.nodes[static_cast<size_t>(i)].backward_seconds;
    }
    t.forward_s += pricer.prediction(s.index, s.first_node, s.end_node);
    const double r = s.replicas;
    t.forward_s /= r;
    t.backward_s /= r;
    t.update_s = (s.allreduce_seconds + pricer.update(s.first_node, s.end_node)) / r;
    t.deferred_products_s = pricer.deferred_products(s.first_node, s.end_node) / r;
    t.activation_bytes_out = static_cast<int64_t>(std::llround(static_cast<double>(s.bytes_sent_forward) / r));
    t.gradient_bytes_out = static_cast<int64_t>(std::llround(static_cast<double>(s.bytes_sent_backward) / r));
    t.kept_bytes_per_micro_batch = s.in_flight > 0 ? s.memory.activations / s.in_flight : 0;
    t.resident_bytes = s.memory.total - s.memory.activations;
    times.push_back(t);
  }
  return times;
}

PipelineSimulation simulate_plan(const CostProfile& profile, const Plan& plan) {
  const std::vector<StageTimes> times = plan_stage_times(profile, plan);
  const LinkTimes link{.bandwidth = plan.options.link.bandwidth, .latency_s = plan.options.link.latency_s};
  const std::vector<LinkTimes> links(plan.stages.size() - 1, link);
  const Schedule schedule = make_schedule(plan.options.schedule, plan.options.stages, plan.options.micro_batches,
                                          SpecTrainTarget::sequential, plan.options.micro_batches);
  return simulate_pipeline(schedule, times, links);
}

namespace {

Plan build_plan(const CostProfile& profile, const PlanOptions& options, std::span<const int64_t> cuts,
                std::span<const int> replicas, bool user_split) {
  const int64_t n = static_cast<int64_t>(profile.nodes.size());
  const int stages = options.stages;
  Plan plan;
  plan.model = profile.model;
  plan.device = profile.device;
  plan.batch = profile.batch;
  plan.options = options;
  plan.user_split = user_split;
  plan.node_names.reserve(profile.nodes.size());
  for (const NodeCost& c : profile.nodes) plan.node_names.push_back(c.name);
  int next_device = 0;
  double sum_time = 0;
  for (int k = 0; k < stages; ++k) {
    const int64_t first = k == 0 ? 0 : cuts[static_cast<size_t>(k) - 1];
    const int64_t end = k + 1 == stages ? n : cuts[static_cast<size_t>(k)];
    StagePlan s = price_stage(profile, options, k, first, end, replicas[static_cast<size_t>(k)]);
    for (int r = 0; r < s.replicas; ++r) s.devices.push_back(next_device++);
    plan.bottleneck_seconds = std::max(plan.bottleneck_seconds, s.time_seconds);
    plan.single_device_seconds += s.compute_seconds;
    plan.fits_memory_cap &= s.fits_memory_cap;
    sum_time += s.time_seconds;
    plan.stages.push_back(std::move(s));
  }
  {  // one device steps every parameter too, once per micro-batch or per flush
    const StagePricer pricer(profile, options);
    plan.single_device_seconds += pricer.update(0, n) / static_cast<double>(pricer.updates_every());
  }
  const PipelineSimulation sim = simulate_plan(profile, plan);
  const double m = static_cast<double>(options.micro_batches);
  double busy = 0;
  for (const StageSummary& s : sim.stages) busy += s.busy_s;
  plan.makespan_seconds = sim.makespan;
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  plan.throughput = ratio(m, plan.makespan_seconds);
  plan.steady_throughput = ratio(1, plan.bottleneck_seconds);
  plan.single_device_throughput = ratio(1, plan.single_device_seconds);
  plan.speedup = ratio(m * plan.single_device_seconds, plan.makespan_seconds);
  plan.steady_speedup = ratio(plan.single_device_seconds, plan.bottleneck_seconds);
  plan.utilisation = ratio(busy, stages * plan.makespan_seconds);
  plan.bubble_fraction = plan.makespan_seconds > 0 ? 1 - plan.utilisation : 0;
  plan.balance = ratio(plan.bottleneck_seconds, sum_time / stages);
  for (StagePlan& s : plan.stages)
    s.idle_fraction = plan.bottleneck_seconds > 0 ? 1 - s.time_seconds / plan.bottleneck_seconds : 0;
  return plan;
}

}  // namespace

StagePlan price_stage(const CostProfile& profile, const PlanOptions& options, int k, int64_t first, int64_t end,
                      int replicas) {
  ONNXTRAIN_CHECK(k >= 0 && k < options.stages && first >= 0 && first < end &&
                      end <= static_cast<int64_t>(profile.nodes.size()) && replicas >= 0,
                  "price_stage: bad stage range");
  const StagePricer pricer(profile, options);
  StagePlan s;
  s.index = k;
  s.first_node = first;
  s.end_node = end;
  s.first_name = profile.nodes[static_cast<size_t>(first)].name;
  s.last_name = profile.nodes[static_cast<size_t>(end - 1)].name;
  s.replicas = replicas > 0 ? replicas : pricer.replicas(k);
  const int r = s.replicas;
  s.weight_versions = pricer.weight_versions(k);
  s.in_flight = static_cast<int>(pricer.in_flight(k));
  s.parameter_bytes = pricer.parameters(first, end);
  s.flops = pricer.flops(first, end);
  s.compute_seconds = pricer.compute(first, end);
  s.send_forward_seconds = pricer.send_forward(k, end);
  s.send_backward_seconds = pricer.send_backward(k, first);
  s.allreduce_seconds = pricer.allreduce(first, end, r);
  s.time_seconds = pricer.time(k, first, end, r);
  s.bytes_sent_forward = k + 1 < options.stages ? profile.cut_activation_bytes[static_cast<size_t>(end)] : 0;
  s.bytes_sent_backward = k > 0 ? profile.cut_gradient_bytes[static_cast<size_t>(first)] : 0;
  s.memory = pricer.memory(k, first, end);
  s.fits_memory_cap = options.memory_cap == 0 || s.memory.total <= options.memory_cap;
  return s;
}

int64_t smallest_memory_cap(const CostProfile& profile, const PlanOptions& options) {
  PlanOptions o = options;
  o.memory_cap = 0;
  validate(profile, o);
  o.devices = 0;  // memory does not depend on the replica count: search splits only
  o.replicas.clear();
  const StagePricer pricer(profile, o);
  Solution<int64_t> best;
  const bool found = solve<int64_t>(
      pricer, o, [&](int k, int64_t i, int64_t j, int) { return pricer.memory_total(k, i, j); },
      [](int, int64_t, int64_t, int) { return true; },
      [](int64_t acc, int64_t c, bool first) { return first ? c : std::max(acc, c); }, best);
  ONNXTRAIN_CHECK(found, "smallest_memory_cap: a valid profile always has a split");
  return best.value;
}

namespace {

// Both passes of the DP under `allowed` (the memory cap, or a user split): the least bottleneck, then
// among the choices whose every stage is within it, the least total time (fewest bytes cut, most useful
// replicas). Stage times are recomputed bit-identically, so pass 1's choice qualifies for pass 2.
template <typename Allowed>
bool solve_plan(const StagePricer& pricer, const PlanOptions& o, Allowed allowed, Solution<double>& out) {
  auto time = [&](int k, int64_t i, int64_t j, int r) { return pricer.time(k, i, j, r); };
  Solution<double> bottleneck;
  if (!solve<double>(
          pricer, o, time, allowed, [](double acc, double c, bool first) { return first ? c : std::max(acc, c); },
          bottleneck))
    return false;
  const bool found = solve<double>(
      pricer, o, time,
      [&](int k, int64_t i, int64_t j, int r) {
        return allowed(k, i, j, r) && pricer.time(k, i, j, r) <= bottleneck.value;
      },
      [](double acc, double c, bool first) { return first ? c : acc + c; }, out);
  if (!found) out = std::move(bottleneck);  // only if a compiler priced a stage differently twice
  return true;
}

}  // namespace

// How much slower a bottleneck may get for cutting between a transformer's blocks: fewer bytes sent,
// and no stage holding half an attention; beyond this the balanced split wins.
constexpr double kBlockCutSlack = 1.10;

namespace {

// How far (in nodes) refine_by_makespan moves a cut from where the DP put it.
constexpr int64_t kMakespanWindow = 64;

// A flushing schedule (GPipe, 1F1B-flush) pays per mini-batch the fill and drain, and its stages'
// updates at the flush, which the DP's bottleneck (compute + update / M per micro-batch, the steady
// state of the asynchronous schedules) does not see: the last stage's update runs while the earlier
// stages still drain their backward passes, the first stage's ends the flush. ResNet-18 over 2 stages
// of 4 micro-batches: the DP's split put layer2.1 on the first stage, 12% slower measured than the
// split the makespan prefers (`bench --strategies gpipe:2x4`). So each cut in turn tries the positions
// 1, 2, 4, ..., kMakespanWindow nodes either way (between its neighbours, within the window around the
// DP's cut) and moves to the one of the least simulated makespan, until no cut moves; a move must be
// strictly better, so equal makespans keep the DP's choice. Each try is one event simulation, about 15
// per cut and sweep (`partition` of T5's 425 nodes on 16 stages of 64 micro-batches for an H100: 0.8 s, of
// which 0.2 s without the refinement, and 4 s when it tried every position in the window). `allowed(k, first, end)`
// keeps the DP's constraints (memory cap, block cuts); replicas stay as chosen.
template <typename Allowed>
Plan refine_by_makespan(const CostProfile& profile, const PlanOptions& options, Plan plan, Allowed allowed) {
  std::vector<int64_t> cuts;
  std::vector<int> replicas;
  for (const StagePlan& s : plan.stages) {
    if (s.index > 0) cuts.push_back(s.first_node);
    replicas.push_back(s.replicas);
  }
  const int64_t n = static_cast<int64_t>(profile.nodes.size());
  const std::vector<int64_t> planned = cuts;
  bool moved = true;
  while (moved) {
    moved = false;
    for (size_t c = 0; c < cuts.size(); ++c) {
      const int64_t lo = std::max(c == 0 ? 1 : cuts[c - 1] + 1, planned[c] - kMakespanWindow);
      const int64_t hi = std::min(c + 1 == cuts.size() ? n - 1 : cuts[c + 1] - 1, planned[c] + kMakespanWindow);
      const int64_t first = c == 0 ? 0 : cuts[c - 1], end = c + 1 == cuts.size() ? n : cuts[c + 1];
      const int64_t from = cuts[c];
      for (int64_t step = 1; step <= kMakespanWindow; step *= 2) {
        for (const int64_t at : {from - step, from + step}) {
          if (at < lo || at > hi || !allowed(static_cast<int>(c), first, at) ||
              !allowed(static_cast<int>(c) + 1, at, end))
            continue;
          std::vector<int64_t> trial = cuts;
          trial[c] = at;
          Plan candidate = build_plan(profile, options, trial, replicas, false);
          if (candidate.makespan_seconds < plan.makespan_seconds) {
            plan = std::move(candidate);
            cuts = std::move(trial);
            moved = true;
          }
        }
      }
    }
  }
  return plan;
}

// The trained tensor with readers on both sides of cut c (CostProfile::cut_splits_tied), or null.
const std::string* tied_tensor_at(const CostProfile& profile, int64_t c) {
  const auto at = static_cast<size_t>(c);
  return at < profile.cut_splits_tied.size() && !profile.cut_splits_tied[at].empty() ? &profile.cut_splits_tied[at]
                                                                                     : nullptr;
}

}  // namespace

Plan plan_pipeline(const CostProfile& profile, const PlanOptions& options) {
  validate(profile, options);
  const StagePricer pricer(profile, options);
  Solution<double> best;
  const auto n = static_cast<int64_t>(profile.nodes.size());
  // A cut between two readers of one trained tensor is never taken: the pipelines refuse tied weights.
  auto untied = [&](int64_t i, int64_t j) { return !tied_tensor_at(profile, i) && !tied_tensor_at(profile, j); };
  auto fits = [&](int k, int64_t i, int64_t j) {
    return untied(i, j) && (options.memory_cap == 0 || pricer.memory_total(k, i, j) <= options.memory_cap);
  };
  const std::vector<int>& crossing = profile.cut_gradient_tensors;
  auto block_cut = [&](int64_t c) { return c == 0 || c == n || crossing.at(static_cast<size_t>(c)) == 1; };
  const bool found = solve_plan(
      pricer, options, [&](int k, int64_t i, int64_t j, int) { return fits(k, i, j); }, best);
  if (!found) {
    Solution<double> any_untied;
    PlanOptions uncapped = options;
    uncapped.memory_cap = 0;
    if (!solve_plan(
            pricer, uncapped, [&](int, int64_t i, int64_t j, int) { return untied(i, j); }, any_untied)) {
      const auto tied = std::find_if(profile.cut_splits_tied.begin(), profile.cut_splits_tied.end(),
                                     [](const std::string& name) { return !name.empty(); });
      throw Error("no split of " + describe_model(profile) + " into " + std::to_string(options.stages) +
                  " stages keeps every trained tensor on one stage: '" + *tied +
                  "' is read by nodes far apart (tied weights), and the pipelines update a tensor where it lives; "
                  "train it with fewer stages or a replicated strategy (dp)");
    }
    const int64_t need = smallest_memory_cap(profile, options);
    throw Error("no split of " + describe_model(profile) + " into " + std::to_string(options.stages) +
                " stages fits the memory cap of " + format_bytes(options.memory_cap) + " per device (schedule " +
                std::string(pipeline_strategy_name(options.schedule)) + "); the smallest cap that works is " +
                format_bytes(need));
  }
  Plan plan = build_plan(profile, options, best.cuts, best.replicas, false);
  // (With a device budget the DP chose the replica counts for its cuts; those plans keep its split.)
  const bool flushes = strategy_traits(options.schedule).flushes && options.devices == 0;
  if (flushes)
    plan = refine_by_makespan(profile, options, std::move(plan),
                              [&](int k, int64_t i, int64_t j) { return fits(k, i, j); });
  Solution<double> between_blocks;
  const bool blocks_wanted =
      options.cut_between_blocks && profile.has_attention && crossing.size() == profile.nodes.size() + 1;
  if (blocks_wanted && !std::all_of(best.cuts.begin(), best.cuts.end(), block_cut) &&
      solve_plan(
          pricer, options,
          [&](int k, int64_t i, int64_t j, int) { return block_cut(i) && block_cut(j) && fits(k, i, j); },
          between_blocks)) {
    Plan blocks = build_plan(profile, options, between_blocks.cuts, between_blocks.replicas, false);
    if (flushes) {
      blocks = refine_by_makespan(profile, options, std::move(blocks), [&](int k, int64_t i, int64_t j) {
        return block_cut(i) && block_cut(j) && fits(k, i, j);
      });
    }
    const bool close = flushes ? blocks.makespan_seconds <= kBlockCutSlack * plan.makespan_seconds
                               : blocks.bottleneck_seconds <= kBlockCutSlack * plan.bottleneck_seconds;
    if (close) return blocks;
  }
  return plan;
}

Plan evaluate_split(const CostProfile& profile, std::span<const int64_t> cuts, const PlanOptions& options) {
  validate(profile, options);
  const int64_t n = static_cast<int64_t>(profile.nodes.size());
  const size_t want = static_cast<size_t>(options.stages) - 1;
  if (cuts.size() != want)
    throw Error("split: " + std::to_string(options.stages) + " stages need " + std::to_string(want) + " cut position" +
                (want == 1 ? "" : "s") + ", got " + std::to_string(cuts.size()));
  std::vector<int64_t> bounds = {0};
  for (size_t i = 0; i < cuts.size(); ++i) {
    if (cuts[i] < 1 || cuts[i] > n - 1)
      throw Error("split: cut position " + std::to_string(cuts[i]) + " is outside 1.." + std::to_string(n - 1) + " (" +
                  describe_model(profile) + " has " + std::to_string(n) +
                  " nodes; cut c lies between nodes c-1 and c)");
    if (i > 0 && cuts[i] <= cuts[i - 1])
      throw Error("split: cut positions must be strictly increasing, got " + std::to_string(cuts[i - 1]) + " then " +
                  std::to_string(cuts[i]) + " (a stage would be empty)");
    if (const std::string* tied = tied_tensor_at(profile, cuts[i]))
      throw Error("split: cut position " + std::to_string(cuts[i]) + " has readers of the trained tensor '" + *tied +
                  "' on both sides (tied weights), which the pipelines refuse: each trained tensor lives on one stage");
    bounds.push_back(cuts[i]);
  }
  bounds.push_back(n);
  // The same DP restricted to this split: it only chooses replica counts (with options.devices).
  const StagePricer pricer(profile, options);
  Solution<double> best;
  const bool found = solve_plan(
      pricer, options,
      [&](int k, int64_t i, int64_t j, int) {
        return i == bounds[static_cast<size_t>(k)] && j == bounds[static_cast<size_t>(k) + 1];
      },
      best);
  ONNXTRAIN_CHECK(found, "evaluate_split: a validated split is always allowed");
  return build_plan(profile, options, cuts, best.replicas, true);
}

std::vector<int64_t> parse_split(std::string_view text) {
  std::vector<int64_t> cuts;
  if (text.empty()) return cuts;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? text.size() - pos : comma - pos);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v < 0)
      throw Error("split '" + std::string(text) + "': '" + std::string(item) +
                  "' is not a non-negative integer (expected cut positions like 3,7,12)");
    cuts.push_back(v);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return cuts;
}

}  // namespace onnxtrain
