// `onnxtrain simulate MODEL... --machine PRESET|FILE [--strategies LIST] [--recommend]`: what the strategies
// would do on a machine we may not have, from the event simulation (simulator/strategy_simulation.h) with
// per-pass times from the cost model on the machine's datasheet device. Prints a table per model, and
// with --recommend the five fastest configurations that fit, why each is limited, the staleness risks,
// and the `onnxtrain train` command (with its plan) for the fastest one without a staleness risk.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "frontend/importer.h"
#include "graph/autodiff/training_recipe.h"
#include "graph/error.h"
#include "graph/mixed_precision.h"
#include "partitioner/cost_model.h"
#include "partitioner/plan_io.h"
#include "simulator/recommend.h"
#include "simulator/simulation_trace.h"
#include "simulator/strategy_simulation.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/model_import.h"
#include "tools/output_paths.h"
#include "tools/text_file.h"
#include "tools/zoo.h"

namespace onnxtrain::cli {
namespace {

namespace fs = std::filesystem;

struct SimulateOptions {
  std::vector<std::string> models;
  std::string zoo, zoo_dir, machine, strategies, json, trace, plan_out = "recommended-plan.json";
  std::string loss = "cross-entropy", optimizer = "momentum", precision = "fp32";
  int64_t batch = 0, steps = 40, warmup = 8, seq_len = 0;
  int buckets = 1;
  bool recommend = false;
};

// The cost model's profiles of one model on the machine's device, one per micro-batch (cached).
class DatasheetProfiles {
 public:
  DatasheetProfiles(const std::string& path, const SimulateOptions& o, const DeviceDescription& device)
      : path_(path), device_(device), model_(import_for_costs(path, o.seq_len)) {
    if (const std::vector<std::string> unbound = unbound_sequence_dims(model_.graph); !unbound.empty()) {
      throw Error(path + ": the data input's dimension '" + unbound.front() +
                  "' is symbolic, so the costs are unknown: give --seq-len T");
    }
    TrainingRecipeOptions t;
    t.loss = parse_loss_spec(o.loss);
    t.loss.classes_last = is_language_model(model_.graph);
    t.precision = precision_from_name(o.precision);
    // CPU rewrites; the datasheet machines are GPUs, which train the model's nodes.
    t.set_cpu_rewrites(false);
    training_ = make_training_recipe(model_.graph, t).training;  // the graph `onnxtrain train` runs
  }
  const CostProfile& at(int64_t micro_batch) {
    auto it = cache_.find(micro_batch);
    if (it == cache_.end()) {
      CostProfile p = build_cost_profile(training_, micro_batch, device_);
      p.model = path_;
      it = cache_.emplace(micro_batch, std::move(p)).first;
    }
    return it->second;
  }

 private:
  std::string path_;
  DeviceDescription device_;
  ImportedModel model_;
  TrainingGraph training_;
  std::map<int64_t, CostProfile> cache_;
};

nlohmann::json simulation_json(const StrategySimulation& s) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerFigures& w : s.workers)
    workers.push_back({{"name", w.name},
                       {"busy_fraction", w.busy_fraction},
                       {"blocked_fraction", w.blocked_fraction},
                       {"comm_seconds_per_step", w.comm_seconds_per_step},
                       {"peak_memory_bytes", w.peak_memory}});
  nlohmann::json j = {{"samples_per_s", s.samples_per_s},
                      {"step_seconds", s.step_seconds},
                      {"bubble_fraction", s.bubble_fraction},
                      {"peak_memory_bytes", s.peak_memory},
                      {"fits_memory", s.fits_memory},
                      {"limited_by", s.limited_by},
                      {"workers", workers}};
  if (s.plan) {
    nlohmann::json split = nlohmann::json::array();
    for (const StagePlan& st : s.plan->stages) split.push_back({{"first", st.first_name}, {"last", st.last_name}});
    j["split"] = split;
  }
  return j;
}

std::string safe_name(std::string text) {
  for (char& c : text)
    if (c == ':' || c == '/' || c == ' ') c = '-';
  return text;
}

void print_table(const std::string& model, const Machine& machine, int64_t batch, const SimulateOptions& o,
                 const std::vector<StrategySimulation>& runs) {
  std::printf("%s on %s (simulated), batch %lld, steady state: %lld steps of %lld, %lld left out at each end\n",
              model.c_str(), machine.name.c_str(), static_cast<long long>(batch),
              static_cast<long long>(o.steps - 2 * o.warmup), static_cast<long long>(o.steps),
              static_cast<long long>(o.warmup));
  std::printf("%-16s %12s %8s %10s %7s %12s  %s\n", "strategy", "samples/s", "speed-up", "step ms", "bubble",
              "peak mem/dev", "limited by");
  const double base = runs.front().samples_per_s;
  for (const StrategySimulation& r : runs)
    std::printf("%-16s %12.1f %8.2f %10.3f %6.0f%% %12s  %s\n", r.strategy.spec.c_str(), r.samples_per_s,
                base > 0 ? r.samples_per_s / base : 0.0, 1e3 * r.step_seconds, 100 * r.bubble_fraction,
                format_megabytes(r.peak_memory).c_str(), r.limited_by.c_str());
}

nlohmann::json print_recommendation(const std::string& model, const Machine& machine, int64_t batch,
                                    const SimulateOptions& o, const Recommendation& rec, double single_rate) {
  std::printf("\nrecommendation for %s on %s: %zu configurations fit, %zu left out\n", model.c_str(),
              machine.name.c_str(), rec.ranked.size(), rec.left_out.size());
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < rec.ranked.size() && i < 5; ++i) {
    const RankedStrategy& r = rec.ranked[i];
    std::printf("%zu. %-16s %10.1f samples/s (%.2fx one device), %s; limited by %s\n", i + 1,
                r.simulation.strategy.spec.c_str(), r.simulation.samples_per_s,
                single_rate > 0 ? r.simulation.samples_per_s / single_rate : 0.0,
                format_megabytes(r.simulation.peak_memory).c_str(), r.simulation.limited_by.c_str());
    if (!r.staleness_warning.empty()) std::printf("   staleness risk: %s\n", r.staleness_warning.c_str());
    nlohmann::json j = simulation_json(r.simulation);
    j["strategy"] = r.simulation.strategy.spec;
    if (!r.staleness_warning.empty()) j["staleness_warning"] = r.staleness_warning;
    top.push_back(j);
  }
  for (const std::string& why : rec.left_out)
    if (why.find("memory") != std::string::npos) std::printf("   left out: %s\n", why.c_str());
  if (rec.ranked.empty()) throw Error("simulate --recommend: no configuration fits " + machine.name);
  // The fastest without a staleness risk (within 0.5% they are already ranked that way); the fastest of
  // all when every one carries a risk.
  std::vector<std::string> warnings;
  for (const RankedStrategy& r : rec.ranked) warnings.push_back(r.staleness_warning);
  const size_t chosen = recommended_index(warnings);
  const StrategySimulation& winner = rec.ranked[chosen].simulation;
  std::string plan_path;
  if (winner.plan) {
    // One plan per model: with several models, --plan-out's stem gets the model's name.
    plan_path = o.plan_out;
    if (o.models.size() + (o.zoo.empty() ? 0 : 1) > 1 || o.zoo.find(',') != std::string::npos) {
      const fs::path out(o.plan_out);
      plan_path =
          (out.parent_path() / (out.stem().string() + "-" + fs::path(model).stem().string() + out.extension().string()))
              .string();
    }
    write_plan(*winner.plan, plan_path);
  }
  // Presets and device profiles describe GPUs unless their name says CPU (a profile of a CPU, as the tests use).
  const bool cuda = machine.device.name.find("CPU") == std::string::npos;
  const bool processes = winner.strategy.replicas > 1 || winner.strategy.devices() > machine.devices_per_node;
  const std::string command = train_command(model, winner.strategy, batch, plan_path, cuda, processes);
  std::printf("recommended: %s (%s)%s\n  %s\n", winner.strategy.spec.c_str(),
              !rec.ranked[chosen].staleness_warning.empty()
                  ? "the fastest; every configuration carries a staleness risk"
              : chosen == 0 ? "the fastest"
                            : "the fastest without a staleness risk",
              plan_path.empty() ? "" : (", its plan written to " + plan_path).c_str(), command.c_str());
  return {{"top", top},
          {"left_out", rec.left_out},
          {"recommended", winner.strategy.spec},
          {"command", command},
          {"plan", plan_path}};
}

void run_simulate(const SimulateOptions& o) {
  if (o.machine.empty())
    throw Error("simulate: give --machine PRESET or FILE.json (presets: " + known_machine_presets() + ")");
  if (2 * o.warmup >= o.steps)
    throw Error("simulate: --steps must be more than twice --warmup (left out at both ends)");
  std::vector<NamedPath> inputs = {{"the --machine file", o.machine}};
  for (const std::string& m : o.models) inputs.push_back({"a model simulated", m});
  refuse_outputs_over_inputs({{"--json", o.json}, {"--trace", o.trace}, {"--plan-out", o.recommend ? o.plan_out : ""}},
                             inputs);
  const Machine machine = machine_from_argument(o.machine);
  std::vector<ZooModel> models;
  for (const std::string& path : o.models) models.push_back({path, o.batch > 0 ? o.batch : 32});
  if (!o.zoo.empty())
    for (ZooModel m : zoo_models(o.zoo, o.zoo_dir)) {
      if (o.batch > 0) m.batch = o.batch;
      models.push_back(m);
    }
  if (models.empty()) throw Error("simulate: no model: give MODEL files or --zoo NAME,...");
  if (o.strategies.empty() && !o.recommend) throw Error("simulate: give --strategies LIST, --recommend, or both");
  std::fprintf(stderr, "%s\n", machine.describe().c_str());
  if (!o.trace.empty()) fs::create_directories(o.trace);

  nlohmann::json doc = {{"machine",
                         {{"name", machine.name},
                          {"source", machine.source},
                          {"nodes", machine.nodes},
                          {"devices_per_node", machine.devices_per_node},
                          {"device", machine.device.name},
                          {"device_memory_bytes", machine.device.memory_bytes},
                          {"intra_node_link", machine.intra_node.name},
                          {"inter_node_link", machine.inter_node.name}}},
                        {"runs", nlohmann::json::array()}};
  for (const ZooModel& m : models) {
    DatasheetProfiles profiles(m.path, o, machine.device);
    const ProfileAt profile_at = [&](int64_t micro_batch, int) -> const CostProfile& {
      return profiles.at(micro_batch);
    };
    const SimulationSettings settings{.batch = m.batch,
                                      .steps = o.steps,
                                      .warmup = o.warmup,
                                      .cooldown = o.warmup,
                                      .optimizer_slots = optimizer_state_slots(o.optimizer),
                                      .update_passes = optimizer_update_passes(o.optimizer),
                                      .dp_buckets = o.buckets};
    std::vector<StrategySimulation> runs;
    runs.push_back(simulate_strategy(parse_strategy_specs("single", 1).front(), machine, profile_at, settings));
    if (!o.strategies.empty())
      for (const StrategySpec& s : parse_strategy_specs(o.strategies, machine.devices()))
        if (s.spec != "single") runs.push_back(simulate_strategy(s, machine, profile_at, settings));
    print_table(m.path, machine, m.batch, o, runs);
    for (const StrategySimulation& r : runs) {
      doc["runs"].push_back(
          {{"model", m.path}, {"strategy", r.strategy.spec}, {"batch", m.batch}, {"simulated", simulation_json(r)}});
      if (!o.trace.empty()) {
        nlohmann::json events = nlohmann::json::array();
        append_simulation_events(events, *r.sim, "simulated: " + r.strategy.spec + " on " + machine.name, 1);
        const fs::path file = fs::path(o.trace) / ("trace-" + fs::path(m.path).stem().string() + "-" +
                                                   safe_name(r.strategy.spec) + ".json");
        write_text_file(file.string(), nlohmann::json{{"traceEvents", events}}.dump() + "\n");
      }
    }
    if (o.recommend) {
      const Recommendation rec = recommend(machine, profile_at, settings);
      doc["recommendation"][m.path] =
          print_recommendation(m.path, machine, m.batch, o, rec, runs.front().samples_per_s);
    }
    std::printf("\n");
  }
  if (!o.json.empty()) write_text_file(o.json, doc.dump(2) + "\n");
  if (!o.trace.empty())
    std::fprintf(stderr, "traces in %s (open in https://ui.perfetto.dev or chrome://tracing)\n", o.trace.c_str());
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Predict what training strategies would do on a machine you may not have: a discrete-event simulation of each\n"
      "strategy's schedule (the executor's own instruction lists) with per-pass times from the cost model on the\n"
      "machine's datasheet device, every transfer on its link, ring all-reduces and parameter-server traffic.\n"
      "Prints samples/s, the speed-up over one device, the bubble, peak memory per device and what limits each run.\n"
      "--recommend ranks every configuration that fits and prints the command for the fastest without a staleness\n"
      "risk. Figures are simulated, not measured: `onnxtrain bench` compares the same model with measurements here.");
  cmd->add_option("models", o->models, "the .onnx files");
  cmd->add_option("--zoo", o->zoo, "comma-separated networks of models/zoo/zoo.json (resnet50, vgg16, ...)");
  cmd->add_option("--zoo-dir", o->zoo_dir, "where zoo.json and the zoo's files are (default: models/zoo)");
  cmd->add_option(
         "--machine", o->machine,
         "a preset (" + known_machine_presets() +
             ") or a JSON file describing nodes, devices and links "
             "({\"name\", \"nodes\", \"devices_per_node\", \"device\": a device preset or an object as partition's "
             "--device-profile, \"intra_node_link\", \"inter_node_link\" (required with nodes > 1), \"host_link\"}: "
             "a link is a preset name or {\"name\", \"bandwidth\", \"latency_s\"})")
      ->required();
  cmd->add_option(
      "--strategies", o->strategies,
      "comma-separated: single, dp:R, cs:R, ps:W:S, naive:N, pipedream:N, spectrain:N, gpipe:NxM, 1f1b:NxM, 2bw:NxM, "
      "hybrids "
      "pipedream:NxR, gpipe:NxMxR ..., all (every one over all the machine's devices); one-device single is "
      "always added");
  cmd->add_option("--batch", o->batch, "global mini-batch (default: the zoo's, else 32)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seq-len", o->seq_len,
                  "sequence length, when the data input has a symbolic sequence dimension (a transformer export)")
      ->check(positive_number);
  cmd->add_option("--steps", o->steps, "mini-batches simulated (default 40)")->check(CLI::Range(2, 100000));
  cmd->add_option("--warmup", o->warmup,
                  "of them, left out of samples/s at each end: the fill and the drain (default 8)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--optimizer", o->optimizer,
                  "sgd, momentum (default), nesterov, adam, adamw, adagrad: its state and update time");
  cmd->add_option("--precision", o->precision, "fp32 (default), bf16 or fp16: the dtype the cost model prices");
  cmd->add_option("--loss", o->loss, "the loss attached to the first output (default cross-entropy)");
  cmd->add_option("--buckets", o->buckets,
                  "dp: overlap the all-reduce with the backward in this many buckets (default 1: after it)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--recommend", o->recommend,
                "rank every strategy x stages x micro-batches x replicas that fits; recommend the fastest without a "
                "staleness risk (naive and SpecTrain at 4+ stages, PipeDream at 8, ps with 4+ workers: README's "
                "convergence study) and print its train command");
  cmd->add_option(
      "--plan-out", o->plan_out,
      "with --recommend: where the winner's pipeline plan goes (default recommended-plan.json; with several "
      "models, recommended-plan-MODEL.json)");
  cmd->add_option("--json", o->json, "write every figure as one JSON document: {machine, runs: [...], recommendation}");
  cmd->add_option("--trace", o->trace,
                  "write DIR/trace-MODEL-STRATEGY.json per run: the simulated timeline (Chrome trace)");
  cmd->callback([o] { run_simulate(*o); });
}

}  // namespace onnxtrain::cli
