// `onnxtrain partition MODEL --stages N [...]`: the cost-based plan of a pipeline over N devices — which
// nodes each stage runs, what it costs, what crosses each cut — as a table, plan.json and Graphviz.
//
// The training graph is the one `onnxtrain train` runs (make_training_recipe builds it: loss attached, BatchNorm
// in training mode), so a plan's node names are the executor's.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "executor/pipeline/schedule.h"
#include "frontend/importer.h"
#include "graph/autodiff/training_recipe.h"
#include "graph/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/cpu_probe.h"
#include "partitioner/device.h"
#include "partitioner/node_profiler.h"
#include "partitioner/plan_dot.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/model_import.h"
#include "tools/output_paths.h"
#include "tools/run_plan_options.h"
#include "tools/text_format.h"

namespace onnxtrain::cli {
namespace {

struct PartitionOptions {
  std::string model, device = "cpu", link, device_profile, strategy = "pipedream", split, output, dot;
  std::string loss = "cross-entropy", optimizer = "momentum", memory_cap, schedule, spectrain_target = "sequential";
  std::string precision = "fp32", prediction_metrics = "on";
  int stages = 2, devices = 0;
  std::vector<int> replicas;
  int64_t batch = 32, micro_batches = 0, seq_len = 0;
  bool profile = false, json = false;
};

// "80G", "80GB", "512MiB", "1.5e9", "1048576": bytes (K/M/G/T are powers of 1000, Ki/Mi/Gi/Ti of 1024).
int64_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw Error("--memory-cap '" + text + "': expected a size in bytes such as 80G, 512MiB or 1e9");
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  const bool binary = unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I');
  double scale = 1;
  if (!unit.empty()) {
    const std::string prefixes = "KMGT";
    const size_t p = prefixes.find(static_cast<char>(std::toupper(unit[0])));
    if (p == std::string::npos || unit.size() > 2 || (unit.size() == 2 && !binary)) {
      throw Error("--memory-cap '" + text + "': unknown unit '" + text.substr(used) +
                  "' (use K, M, G, T, KiB, MiB, GiB, TiB)");
    }
    scale = std::pow(binary ? 1024.0 : 1000.0, static_cast<double>(p + 1));
  }
  if (!(value > 0)) throw Error("--memory-cap '" + text + "' must be positive");
  if (!(value * scale < 9.2e18)) throw Error("--memory-cap '" + text + "' is beyond 9.2 EB, the largest size it takes");
  return static_cast<int64_t>(std::llround(value * scale));
}

// The OpenMP threads each stage (or replica) of the planned run gets, as the pipeline executor shares this
// process's threads out (executor/pipeline/pipeline_trainer.cc): the CPU's probe and --profile measure with
// that many. Measured with all of them, a 2-core machine's kernels cost 1 us of overhead against a stage's
// 0.23 us (a 2-thread fork per tiny kernel), which priced a model of tiny nodes as if they were slow.
int threads_per_stage(const PartitionOptions& o) {
  int workers = o.stages;
  if (o.devices > 0) {
    workers = o.devices;
  } else if (o.replicas.size() == 1) {
    workers = o.stages * o.replicas[0];
  } else if (!o.replicas.empty()) {
    workers = 0;
    for (int r : o.replicas) workers += r;
  }
  return std::max(1, omp_get_max_threads() / std::max(1, workers));
}

// Sets this thread's OpenMP thread count for its lifetime, then restores it.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ScopedOmpThreads() { omp_set_num_threads(saved_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

DeviceDescription device_of(const PartitionOptions& o) {
  if (!o.device_profile.empty()) return read_device_profile(o.device_profile);
  if (o.device == "cpu") {
    const CpuProbe probe = probe_local_cpu();
    if (probe.busy) {
      std::fprintf(stderr,
                   "warning: the CPU is busy (a tiny kernel took %.0f us): the measured rates are low; "
                   "partition again on a quiet machine\n",
                   1e6 * probe.kernel_overhead_s);
    }
    DeviceDescription cpu = describe_local_cpu(probe);
    if (!o.link.empty()) cpu.link = link_from_preset(o.link);
    return cpu;
  }
  return device_from_preset(o.device, o.link);
}

// Edges between forward nodes for the Graphviz picture: each forward value, from its producer to every
// later forward consumer, with its bytes at the micro-batch (symbolic dims taken as the batch).
std::vector<PlanEdge> forward_edges(const TrainingGraph& t, int64_t batch) {
  const Graph& g = t.graph;
  std::vector<PlanEdge> edges;
  std::map<ValueId, int64_t> producer;
  for (size_t i = 0; i < t.forward_node_count; ++i) {
    const Node& n = g.node(g.order()[i]);
    for (ValueId in : n.inputs) {
      auto it = in.valid() ? producer.find(in) : producer.end();
      if (it == producer.end()) continue;
      const Value& v = g.value(in);
      int64_t bytes = static_cast<int64_t>(dtype_size(v.dtype));
      for (const Dim& d : v.shape.dims) bytes *= d.is_static() ? d.value() : batch;
      edges.push_back({it->second, static_cast<int64_t>(i), bytes, v.name});
    }
    for (ValueId out : n.outputs)
      if (out.valid()) producer[out] = static_cast<int64_t>(i);
  }
  return edges;
}

void print_plan(const Plan& p, const CostProfile& profile) {
  std::printf("%-5s %6s %5s  %-28s %-28s %9s %9s %10s %10s %10s %10s\n", "stage", "nodes", "repl", "first node",
              "last node", "params", "FLOPs", "time ms", "memory", "sent fwd", "sent bwd");
  for (const StagePlan& s : p.stages) {
    std::printf("%-5d %6lld %5d  %-28s %-28s %9s %9s %10.3f %10s %10s %10s%s\n", s.index,
                static_cast<long long>(s.end_node - s.first_node), s.replicas, clip(s.first_name, 28).c_str(),
                clip(s.last_name, 28).c_str(), format_byte_size(s.parameter_bytes).c_str(), human(s.flops).c_str(),
                1e3 * s.time_seconds, format_byte_size(s.memory.total).c_str(),
                format_byte_size(s.bytes_sent_forward).c_str(), format_byte_size(s.bytes_sent_backward).c_str(),
                s.fits_memory_cap ? "" : "  over the cap");
  }
  const double samples = static_cast<double>(profile.batch);
  const double mean_stage = p.bottleneck_seconds / std::max(p.balance, 1e-300);
  std::printf("\nslowest stage %.3f ms = %.3f x the mean stage (%.3f ms)\n", 1e3 * p.bottleneck_seconds, p.balance,
              1e3 * mean_stage);
  std::printf("pipeline: %.1f samples/s in steady state (one device: %.1f samples/s, speed-up %.2f)\n",
              samples * p.steady_throughput, samples * p.single_device_throughput, p.steady_speedup);
  std::printf(
      "with %lld micro-batches per flush: %.1f samples/s, speed-up %.2f, bubble fraction %.3f, utilisation %.3f\n",
      static_cast<long long>(p.options.micro_batches), samples * p.throughput, p.speedup, p.bubble_fraction,
      p.utilisation);
}

// --schedule STRATEGY: the instruction table of N stages, without the model. 1F1B strategies show 2N
// mini-batches (enough to reach the steady state), gpipe one mini-batch of M micro-batches.
void print_schedule(const PartitionOptions& o) {
  const PipelineStrategy strategy = parse_pipeline_strategy(o.schedule);
  const StrategyTraits& traits = strategy_traits(strategy);
  const int64_t per_update = traits.accumulates ? (o.micro_batches > 0 ? o.micro_batches : 2) : 1;  // 2bw's M
  const int64_t m = traits.flushes ? (o.micro_batches > 0 ? o.micro_batches : 4) : 2 * int64_t{o.stages} * per_update;
  const Schedule schedule =
      make_schedule(strategy, o.stages, m, parse_spectrain_target(o.spectrain_target), per_update);
  std::printf("%s", format_schedule_table(schedule).c_str());
}

void partition_model(const PartitionOptions& o) {
  if (!o.schedule.empty()) return print_schedule(o);
  if (o.model.empty()) throw Error("partition needs a MODEL (or --schedule STRATEGY)");
  if (o.precision == "fp16")
    usage_error(
        "--precision fp16: pipelines train in fp32 or bf16 (fp16 needs a loss scale the stages would have to agree "
        "on)");
  refuse_outputs_over_inputs({{"-o", o.output}, {"--dot", o.dot}}, {{"the --device-profile", o.device_profile}},
                             {"the model partitioned", o.model});
  ImportedModel model = import_for_costs(o.model, o.seq_len);
  if (const std::vector<std::string> unbound = unbound_sequence_dims(model.graph); !unbound.empty()) {
    throw Error(o.model + ": the data input's dimension '" + unbound.front() +
                "' is symbolic, so the stages' costs are unknown: give --seq-len T");
  }
  TrainingRecipeOptions t;
  t.loss = parse_loss_spec(o.loss);
  t.loss.classes_last = is_language_model(model.graph);  // what train does with per-token labels
  t.precision = precision_from_name(o.precision);
  // CPU rewrites: a GPU trains the model's nodes.
  t.set_cpu_rewrites(o.device == "cpu" && o.device_profile.empty());
  const TrainingRecipe recipe = make_training_recipe(model.graph, t);  // the graph `onnxtrain train` runs
  const TrainingGraph& training = recipe.training;

  const ScopedOmpThreads stage_threads(threads_per_stage(o));
  const DeviceDescription device = device_of(o);
  CostModelReport report;
  CostProfile profile = build_cost_profile(training, o.batch, device, &report);
  profile.model = o.model;
  if (!report.unknown_sizes.empty()) {
    std::fprintf(stderr, "warning: %zu values keep an unknown size at batch %lld and count 0 bytes (first: %s)\n",
                 report.unknown_sizes.size(), static_cast<long long>(o.batch), report.unknown_sizes[0].c_str());
  }
  if (o.profile) {
    if (o.device != "cpu" || !o.device_profile.empty())
      throw Error("--profile measures the local CPU: use --device cpu");
    // A flushing pipeline's stages on this CPU sum their micro-batches' gradients in place and reuse the
    // weights' derived values: its nodes are timed that way.
    const int micro_batches = static_cast<int>(o.micro_batches > 0 ? o.micro_batches : 4 * int64_t{o.stages});
    const bool flushes = strategy_traits(parse_pipeline_strategy(o.strategy)).flushes;
    const NodeTimes times =
        apply_profiled_times(profile, training, o.model, {.micro_batches_summed = flushes ? micro_batches : 1});
    std::fprintf(stderr, "profiled %zu nodes on %d threads (%s)%s%s\n", profile.nodes.size(), times.threads,
                 times.from_cache ? ("cached in " + times.cache_path).c_str() : "measured",
                 times.cache_note.empty() ? "" : "; ", times.cache_note.c_str());
  }

  PlanOptions p =
      run_plan_options({.stages = o.stages,
                        .strategy = o.strategy,
                        .micro_batches = o.micro_batches > 0 ? o.micro_batches : 4 * static_cast<int64_t>(o.stages),
                        .optimizer = o.optimizer,
                        .prediction_metrics = o.prediction_metrics == "on",
                        .cpu_executor = o.device == "cpu" && o.device_profile.empty(),
                        .link = {device.link.name, device.link.bandwidth, device.link.latency_s}});
  p.replicas = o.replicas;
  p.devices = o.devices;
  // The cap: --memory-cap, else the memory of a device given by name or profile (as simulate checks it;
  // an outside check's 1-byte profile planned 7 MiB stages without a word). The CPU has no fixed cap.
  if (!o.memory_cap.empty()) {
    p.memory_cap = parse_byte_size(o.memory_cap);
  } else if ((o.device != "cpu" || !o.device_profile.empty()) && device.memory_bytes > 0) {
    p.memory_cap = static_cast<int64_t>(std::min<uint64_t>(device.memory_bytes, INT64_MAX));
  }
  Plan plan = o.split.empty() ? plan_pipeline(profile, p) : evaluate_split(profile, parse_split(o.split), p);

  if (o.json) {
    std::printf("%s\n", plan_to_json(plan).c_str());
  } else {
    std::printf("%s: %zu nodes, micro-batch %lld, %s, %d stages, %s schedule%s\n", o.model.c_str(),
                profile.nodes.size(), static_cast<long long>(o.batch), describe_device(device).c_str(), o.stages,
                o.strategy.c_str(), o.profile ? ", profiled times" : ", analytic times");
    print_plan(plan, profile);
  }
  // On this CPU the stages are threads of one process: together they must fit its memory (a plan of
  // 368 TiB stages was printed without a word for a 25 GB host by an outside check).
  if (o.device == "cpu" && o.device_profile.empty() && o.memory_cap.empty() && device.memory_bytes > 0) {
    double total = 0;
    for (const StagePlan& s : plan.stages) total += static_cast<double>(s.memory.total);
    if (total > static_cast<double>(device.memory_bytes)) {
      std::fprintf(stderr,
                   "warning: the stages need %.3g GB together, more than this machine's %.3g GB: the run "
                   "would not fit; a smaller --batch would\n",
                   total / 1e9, static_cast<double>(device.memory_bytes) / 1e9);
    }
  }
  if (!o.output.empty()) {
    write_plan(plan, o.output);
    std::fprintf(stderr, "wrote %s\n", o.output.c_str());
  }
  if (!o.dot.empty()) {
    write_plan_dot(plan, forward_edges(training, o.batch), o.dot);
    std::fprintf(stderr, "wrote %s (render: dot -Tsvg %s -o plan.svg)\n", o.dot.c_str(), o.dot.c_str());
  }
}

}  // namespace

void add_partition_command(CLI::App& app) {
  auto o = std::make_shared<PartitionOptions>();
  CLI::App* cmd = app.add_subcommand(
      "partition",
      "Split a model's training graph into N pipeline stages with the cost model and print why: per stage the\n"
      "nodes, parameters, FLOPs, predicted time and memory and the bytes it sends; the predicted throughput,\n"
      "speed-up and bubble against one device. Writes the plan `onnxtrain train --plan` reads (-o).");
  cmd->add_option("model", o->model, "the .onnx file (not needed with --schedule)");
  cmd->add_option("--stages,-n", o->stages, "number of pipeline stages (devices; default 2)")->check(positive_number);
  cmd->add_option("--batch", o->batch, "micro-batch size the costs are for (default 32)")->check(positive_number);
  cmd->add_option("--seq-len", o->seq_len,
                  "sequence length the costs are for, when the data input has a symbolic sequence dimension")
      ->check(positive_number);
  cmd->add_option("--micro-batches", o->micro_batches, "micro-batches per flush (GPipe) or run (default 4 x stages)")
      ->check(positive_number);
  cmd->add_option("--strategy", o->strategy,
                  "pipedream (default) | naive | spectrain | gpipe | 1f1b | 2bw: sets the weight copies and "
                  "activations each stage keeps");
  cmd->add_option("--device", o->device,
                  "cpu (this machine, measured at start on the threads one stage gets; the default) | a100 | h100 | "
                  "h200 (datasheet presets)");
  cmd->add_option("--link", o->link,
                  "link between stages: pcie4 | pcie5 | nvlink3 | nvlink4 | ib-hdr | ib-ndr (presets)");
  cmd->add_option(
      "--device-profile", o->device_profile,
      "a JSON file describing the device and its link, rates in base units: {\"preset\": \"h100\" (optional: "
      "the keys below override it), \"name\", \"fp32_flops\", \"tf32_flops\", \"bf16_flops\", \"fp16_flops\" "
      "(FLOP/s), \"memory_bytes\", \"memory_bandwidth\" (bytes/s), \"compute_efficiency\" and "
      "\"memory_efficiency\" (0 to 1), \"kernel_overhead_s\", \"step_overhead_s\" (a recurrent op's cost per time "
      "step), \"link\": a preset name or {\"name\", "
      "\"bandwidth\", \"latency_s\"}}; without a preset name, fp32_flops, memory_bytes and "
      "memory_bandwidth are required, and an unknown key is an error");
  cmd->add_option("--replicas", o->replicas,
                  "replicas per stage: one number for all, or one per stage (data parallel stages)");
  cmd->add_option("--devices", o->devices,
                  "devices in all (>= stages): the planner also chooses how many replicas each stage gets (PipeDream)")
      ->check(positive_number);
  cmd->add_option("--memory-cap", o->memory_cap, "bytes per device, e.g. 80G or 512MiB; the plan must fit");
  cmd->add_option("--split", o->split, "evaluate this split instead of planning: the N-1 cut positions, e.g. 12,30,41");
  cmd->add_option("--optimizer", o->optimizer, "optimizer whose state is counted in memory (default momentum)");
  cmd->add_option("--prediction-metrics", o->prediction_metrics,
                  "spectrain: on (default, as train) counts the host copies that score each prediction | off")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--loss", o->loss, "loss to attach, as for train (default cross-entropy)");
  cmd->add_option("--precision", o->precision,
                  "fp32 (default) | bf16: plan the training graph `train --precision bf16` runs (with autocast's "
                  "Cast nodes, so its --plan needs a plan made with the same precision)");
  cmd->add_flag("--profile", o->profile,
                "measure every node's forward and backward kernels on this CPU instead of the analytic times "
                "(cached next to the model)");
  cmd->add_option(
      "--schedule", o->schedule,
      "print the time x stage instruction table of a strategy (naive | pipedream | spectrain | gpipe | 1f1b | 2bw) for "
      "--stages and stop");
  cmd->add_option("--spectrain-target", o->spectrain_target,
                  "with --schedule spectrain: sequential (W_i, the default) | paper (the SpecTrain paper's timeline)");
  cmd->add_option("-o,--output", o->output, "write the plan as JSON (what the pipeline executor reads)");
  cmd->add_option("--dot", o->dot, "write a Graphviz picture: nodes coloured by stage, cut edges labelled with bytes");
  cmd->add_flag("--json", o->json, "print the plan as JSON instead of the table");
  cmd->callback([o] { partition_model(*o); });
}

}  // namespace onnxtrain::cli
