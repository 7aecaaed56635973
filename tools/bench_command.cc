// `onnxtrain bench MODEL... --strategies LIST`: every strategy trained for real on the same data, seed and
// weights (a child `onnxtrain train` per run, bench_run.h), K timed steps after W warm-up steps, R repeats
// in rounds (run_rounds); next to each, the simulated prediction from node times measured at start
// (bench_predict.h) and the ratio predicted/measured. Prints a table; --json FILE and --report DIR (report.md,
// report.csv) keep it.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "frontend/importer.h"
#include "graph/cpu_budget.h"
#include "graph/error.h"
#include "simulator/recommend.h"
#include "tools/bench_predict.h"
#include "tools/bench_report.h"
#include "tools/bench_run.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/zoo.h"

namespace onnxtrain::cli {
namespace {
namespace fs = std::filesystem;

struct BenchOptions {
  std::vector<std::string> models;
  std::string zoo, zoo_dir, strategies = "all", json, report, device = "cpu", workdir, loss = "cross-entropy";
  int devices = 2, threads = 0;
  int64_t batch = 0, steps = 20, warmup = 3, repeats = 3;  // batch 0: the zoo's, else 32
  int64_t seq_len = 0;  // token models: ids per sample (0: the input's static length)
  uint64_t seed = 0;
  bool recommend = false;
};

// --recommend: per model, the measured rows (not the one-thread baseline) ranked by median samples/s,
// the top 5 with their staleness risks, and the command of the fastest without one. A pipeline's plan
// (the split it ran) is kept as recommended-plan-MODEL.json in the report folder, else here.
void print_measured_recommendation(const BenchResults& results, const BenchOptions& o) {
  std::vector<std::string> models;
  for (const BenchRow& row : results.rows)
    if (std::find(models.begin(), models.end(), row.model) == models.end()) models.push_back(row.model);
  for (const std::string& model : models) {
    std::vector<const BenchRow*> ranked;
    for (const BenchRow& row : results.rows)
      if (row.model == model && row.ok() && row.threads != 1) ranked.push_back(&row);
    if (ranked.empty()) continue;
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const BenchRow* a, const BenchRow* b) { return a->median() > b->median(); });
    std::vector<std::string> warnings;
    for (const BenchRow* row : ranked)
      warnings.push_back(staleness_warning(parse_strategy_specs(row->strategy, 1).front()));
    std::printf("\nrecommendation for %s on this machine (measured):\n", model.c_str());
    for (size_t i = 0; i < ranked.size() && i < 5; ++i) {
      std::printf("%zu. %-16s %8.1f samples/s (median of %zu)\n", i + 1, ranked[i]->strategy.c_str(),
                  ranked[i]->median(), ranked[i]->runs.size());
      if (!warnings[i].empty()) std::printf("   staleness risk: %s\n", warnings[i].c_str());
    }
    const size_t chosen = recommended_index(warnings);
    const BenchRow& winner = *ranked[chosen];
    std::string plan;
    if (winner.predicted && !winner.predicted->plan_path.empty() && fs::exists(winner.predicted->plan_path)) {
      const fs::path dir = o.report.empty() ? fs::path(".") : fs::path(o.report);
      fs::create_directories(dir);
      plan = (dir / ("recommended-plan-" + fs::path(model).stem().string() + ".json")).string();
      fs::copy_file(winner.predicted->plan_path, plan, fs::copy_options::overwrite_existing);
    }
    std::printf("recommended: %s\n  %s\n", winner.strategy.c_str(),
                train_command(model, parse_strategy_specs(winner.strategy, 1).front(), winner.batch, plan, false, false,
                              winner.data)
                    .c_str());
  }
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

double load_average() {
  double load[1] = {0};
  return ::getloadavg(load, 1) == 1 ? load[0] : -1;
}

nlohmann::json machine_description(int threads) {
  utsname u{};
  ::uname(&u);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"cpu", cpu_model()},
          {"logical_cpus", std::thread::hardware_concurrency()},
          {"threads", threads},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"date", date},
          {"load_average_at_start", load_average()},
          {"onnxtrain", kOnnxtrainVersion}};
}

// The synthetic data every run of `model` trains on: the model's sample shape and class count,
// batch × (warmup + steps) rows, so every timed batch is full. A model that reads token ids gets a
// synthetic token stream (synthetic:T:VOCAB:N) of --seq-len T (or its input's static length) ids.
std::string synthetic_spec_for(const ImportedModel& model, const std::string& path, int64_t rows, int64_t seq_len) {
  const Graph& g = model.graph;
  if (g.inputs.size() != 1 || g.outputs.empty()) {
    throw Error(path +
                ": bench needs a model with one data input (it trains on synthetic images, features or token "
                "ids); time a model with several inputs with `onnxtrain train --data npz:FILE --metrics FILE`");
  }
  const Shape& in = g.value(g.inputs[0]).shape;
  const Shape& out = g.value(g.outputs[0]).shape;
  if (!out.rank_known || out.rank() < 2 || !out.dims.back().is_static()) {
    throw Error(path + ": the first output " + out.to_string() + " has no static class dimension");
  }
  const std::string classes_and_rows = ":" + std::to_string(out.dims.back().value()) + ":" + std::to_string(rows);
  if (is_integer(g.value(g.inputs[0]).dtype)) {
    if (!in.rank_known || in.rank() != 2) throw Error(path + ": token ids " + in.to_string() + ": expected (batch, T)");
    const int64_t length = seq_len > 0 ? seq_len : in.dims[1].is_static() ? in.dims[1].value() : 0;
    if (length <= 0)
      throw Error(path + ": the input " + in.to_string() + " has a dynamic sequence axis: give --seq-len T");
    return "synthetic:" + std::to_string(length) + classes_and_rows;
  }
  std::string dims;
  for (int64_t d = 1; in.rank_known && d < in.rank(); ++d) {
    if (!in.dims[d].is_static())
      throw Error(path + ": input dim " + std::to_string(d) + " is not static: " + in.to_string());
    dims += (dims.empty() ? "" : ",") + std::to_string(in.dims[d].value());
  }
  if (dims.empty()) throw Error(path + ": the input " + in.to_string() + " has no known sample shape");
  return "synthetic:" + dims + classes_and_rows;
}

// One row of the table while its runs are taken: the strategy's prediction (and, for a pipeline, the
// split it predicted, passed as --plan) and the child run's options.
struct PendingRow {
  BenchRow row;
  StrategySpec strategy;
  BenchRunSpec spec;
  std::string tag, label;
};

PendingRow prepare_row(const BenchOptions& o, const std::string& model_path, int64_t batch,
                       const StrategySpec& strategy, BenchPredictor& predictor, const std::string& data, int threads) {
  PendingRow p{
      .row = {.model = model_path, .strategy = strategy.spec, .data = data, .batch = batch, .threads = threads},
      .strategy = strategy,
      .spec = {.model = model_path,
               .data = data,
               .batch = batch,
               .steps = o.steps,
               .warmup = o.warmup,
               .threads = threads,
               .seed = o.seed,
               .workdir = o.workdir},
      .tag = bench_tag(model_path, strategy.spec, threads),
      .label = strategy.spec + (threads == 1 ? " (1 thread)" : "")};
  try {
    p.row.predicted = predictor.predict(
        strategy, batch, threads, (fs::path(o.workdir) / ("plan-" + p.tag + ".json")).string(), o.warmup, o.steps);
    if (!p.row.predicted->plan_path.empty()) p.spec.extra_args = {"--plan", p.row.predicted->plan_path};
  } catch (const Error& e) {
    p.row.prediction_error = e.what();
  }
  return p;
}

// The repeats of a model's rows, round by round: each round runs every row once, in table order, so that
// a host whose speed drifts over minutes (a shared VM's) moves every row's median alike, and the speed-ups
// against the one-thread row compare runs made minutes apart, not a row's runs with another's made ten
// minutes later. A row whose run failed runs no more (the same options fail the same way).
void run_rounds(const BenchOptions& o, const std::string& model_path, std::vector<PendingRow>& rows) {
  const bool terminal = ::isatty(STDERR_FILENO);
  for (int64_t r = 0; r < o.repeats; ++r) {
    for (PendingRow& p : rows) {
      if (!p.row.runs.empty() && !p.row.runs.back().ok) continue;
      if (terminal) {
        std::fprintf(stderr, "\r\033[K  %s %s: round %lld/%lld", fs::path(model_path).filename().c_str(),
                     p.label.c_str(), static_cast<long long>(r + 1), static_cast<long long>(o.repeats));
      }
      p.spec.trace = p.strategy.is_pipeline() && r == 0;  // one timeline per row is enough
      p.row.runs.push_back(run_bench_once(p.spec, p.strategy, p.tag + "-r" + std::to_string(r)));
    }
  }
  if (terminal) std::fprintf(stderr, "\r\033[K");
  for (const PendingRow& p : rows) {
    const MeasuredRun& last = p.row.runs.back();
    std::fprintf(stderr, "  %-22s %s\n", p.label.c_str(),
                 last.ok ? (std::to_string(static_cast<int64_t>(p.row.median())) + " samples/s").c_str() : "FAILED");
  }
}

void run_bench(const BenchOptions& o_in) {
  BenchOptions o = o_in;
  if (o.device != "cpu") {
    throw Error("bench --device " + o.device +
                ": only cpu is measured so far (run tools/gpu-check.sh on a GPU machine)");
  }
  const std::vector<StrategySpec> strategies = parse_strategy_specs(o.strategies, o.devices);
  for (const StrategySpec& s : strategies)
    if (s.replicas > 1)
      throw Error("bench --strategies: '" + s.spec +
                  "': pipeline x data-parallel hybrids run over processes only "
                  "(mpirun -np N*R onnxtrain train --stages N --replicas R) and bench runs one process per strategy; "
                  "onnxtrain simulate plays them");
  const int threads = o.threads > 0 ? o.threads : cpu_budget().cpus;
  const double load = load_average();
  if (load > 0.5) {
    std::fprintf(stderr,
                 "bench: warning: the load average is %.2f: another process is using the CPUs, and the "
                 "timings will be low and noisy; measure on an idle machine\n",
                 load);
  }
  std::unique_ptr<TempWorkdir> temp;
  if (o.workdir.empty()) {
    temp = std::make_unique<TempWorkdir>();
    o.workdir = temp->path;
  }
  fs::create_directories(o.workdir);

  std::vector<ZooModel> models;
  for (const std::string& path : o.models) models.push_back({path, o.batch > 0 ? o.batch : 32});
  if (!o.zoo.empty()) {
    for (ZooModel m : zoo_models(o.zoo, o.zoo_dir)) {
      if (o.batch > 0) m.batch = o.batch;
      models.push_back(m);
    }
  }
  if (models.empty()) throw Error("bench: no model: give MODEL files or --zoo NAME,...");

  BenchResults results{.machine = machine_description(threads)};
  for (const auto& [model_path, batch] : models) {
    const ImportedModel model = import_model(model_path);
    const std::string data = synthetic_spec_for(model, model_path, batch * (o.warmup + o.steps), o.seq_len);
    std::fprintf(stderr, "bench %s: %s, batch %lld, %lld timed steps after %lld warm-up, %lld repeats, %d threads\n",
                 model_path.c_str(), data.c_str(), static_cast<long long>(batch), static_cast<long long>(o.steps),
                 static_cast<long long>(o.warmup), static_cast<long long>(o.repeats), threads);
    std::fprintf(stderr, "  profiling the nodes on this machine for the predictions...\n");
    BenchPredictor predictor(model_path, o.loss, o.seq_len);
    // The baseline of every speed-up: one device, one thread.
    std::vector<PendingRow> rows;
    rows.push_back(prepare_row(o, model_path, batch, parse_strategy_specs("single", 1).front(), predictor, data, 1));
    for (const StrategySpec& s : strategies)
      rows.push_back(prepare_row(o, model_path, batch, s, predictor, data, threads));
    run_rounds(o, model_path, rows);
    for (PendingRow& p : rows) results.rows.push_back(std::move(p.row));
  }
  results.machine["load_average_at_end"] = load_average();
  std::printf("%s", format_bench_table(results).c_str());
  if (!o.json.empty()) write_text_file(o.json, bench_json(results).dump(2) + "\n");
  if (!o.report.empty()) write_bench_report(results, o.report);
  if (o.recommend) print_measured_recommendation(results, o);
  std::string failed;
  for (const BenchRow& row : results.rows)
    if (!row.ok()) failed += (failed.empty() ? "" : ", ") + row.strategy;
  if (!failed.empty()) throw Error("bench: these runs failed (see the table): " + failed);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure training strategies against each other on one or more models: each strategy trains the model for\n"
      "real (a child `onnxtrain train` per run: same synthetic data, seed and initial weights), K timed steps after\n"
      "W warm-up steps, R repeats taken round by round. Prints samples/s (median, min, max), the speed-up over one "
      "thread, per stage or\n"
      "replica timing, peak memory and the loss, next to the prediction of the event simulation (as onnxtrain\n"
      "simulate) with node times measured at start, and the ratio predicted/measured. Pipelines run the split that\n"
      "was predicted (passed as --plan).\n"
      "Measure on an idle machine: bench warns when the load average is above 0.5.");
  cmd->add_option("models", o->models,
                  "the .onnx files to measure (one data input each: images, features or token ids)");
  cmd->add_option(
      "--zoo", o->zoo,
      "comma-separated networks of models/zoo/zoo.json (resnet18_32, vgg11_32, mobilenet_v2_32 are the "
      "CPU-sized ones; resnet50 ...), read from models/zoo/NAME.onnx: models/zoo/make_zoo.py NAME makes them");
  cmd->add_option("--zoo-dir", o->zoo_dir, "where zoo.json and the zoo's files are (default: models/zoo)");
  cmd->add_option("--strategies", o->strategies,
                  "comma-separated: single, dp:R, cs:R (central storage), ps:W:S (W workers, S shards), naive:N, "
                  "pipedream:N, spectrain:N, gpipe:NxM, 1f1b:NxM and 2bw:NxM (N stages, M micro-batches), all (every "
                  "one for --devices; the "
                  "default). A one-thread single run is always added: the baseline of the speed-ups");
  cmd->add_option("--devices", o->devices, "the stage or replica count `all` expands to (default 2)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--batch", o->batch, "global mini-batch size of every strategy (default: the zoo's, else 32)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seq-len", o->seq_len,
                  "models that read token ids: ids per sample of the synthetic token stream (default: the input's "
                  "static sequence length)")
      ->check(positive_number);
  cmd->add_option("--steps", o->steps, "timed steps per run (default 20)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", o->warmup, "untimed steps before them (default 3)")->check(CLI::Range(0, 1000000));
  cmd->add_option("--repeats", o->repeats,
                  "runs per strategy, taken in rounds (each round runs every strategy once, in turn, so a machine "
                  "whose speed drifts moves them alike); the table shows their median, min and max (default 3)")
      ->check(CLI::Range(1, 100));
  cmd->add_option(
         "--threads", o->threads,
         "CPU threads every run shares out (default: the CPUs this process may use, its affinity mask capped by "
         "its cgroup's CPU quota)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", o->seed, "seed of the data and weights, the same for every run (default 0)")
      ->check(seed_number);
  cmd->add_option("--loss", o->loss, "the loss attached to the first output (default cross-entropy)");
  cmd->add_option("--device", o->device, "cpu (the default); cuda is not benchmarked yet");
  cmd->add_option("--json", o->json, "write every figure as one JSON document: {machine, runs: [...]}");
  cmd->add_option("--report", o->report, "write DIR/report.md (the tables) and DIR/report.csv");
  cmd->add_flag(
      "--recommend", o->recommend,
      "rank the measured strategies by samples/s, flag staleness risks (README's convergence study) and print "
      "the train command of the fastest without one (a pipeline's plan kept as recommended-plan-MODEL.json)");
  cmd->add_option("--workdir", o->workdir,
                  "keep each run's log, metrics, plan and model here (default: a temporary folder, removed)");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace onnxtrain::cli
