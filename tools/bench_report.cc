#include "tools/bench_report.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "graph/error.h"
#include "simulator/simulation_trace.h"

namespace onnxtrain::cli {
namespace fs = std::filesystem;

namespace {

std::vector<double> throughputs(const BenchRow& row) {
  std::vector<double> v;
  for (const MeasuredRun& r : row.runs)
    if (r.ok) v.push_back(r.samples_per_s);
  std::sort(v.begin(), v.end());
  return v;
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// The share of a run's time lost to waiting: the largest stage bubble of a pipeline, the all-reduce's
// share of a data-parallel step, central storage's and the parameter server's below; -1 when unknown.
double waiting_fraction(const nlohmann::json& report) {
  if (!report.is_object()) return -1;
  if (report.value("kind", "") == "pipeline") {
    double worst = 0;
    for (const auto& s : report["stages"]) worst = std::max(worst, s.value("bubble_fraction", 0.0));
    return worst;
  }
  if (report.value("kind", "") == "data_parallel" && report.value("step_seconds", 0.0) > 0) {
    return report.value("allreduce_seconds", 0.0) / report.value("step_seconds", 0.0);
  }
  // Central storage: the replicas' mean time outside their own compute; the parameter server: the
  // workers' share of time in pulls and pushes.
  if (report.value("kind", "") == "central_storage" && report.value("step_seconds", 0.0) > 0 &&
      !report.value("replica_compute_seconds", nlohmann::json::array()).empty()) {
    double busy = 0;
    for (const auto& c : report["replica_compute_seconds"]) busy += c.get<double>();
    return 1 - busy / report["replica_compute_seconds"].size() / report.value("step_seconds", 0.0);
  }
  if (report.value("kind", "") == "parameter_server") {
    double busy = 0, blocked = 0;
    for (const auto& c : report["worker_compute_seconds"]) busy += c.get<double>();
    for (const auto& c : report["worker_exchange_seconds"]) blocked += c.get<double>();
    return busy + blocked > 0 ? blocked / (busy + blocked) : -1;
  }
  return -1;
}

struct Figures {  // what the table, the CSV and the JSON share
  double median = 0, min = 0, max = 0, speedup = 0, predicted = 0, ratio = 0, waiting = -1, loss = 0;
  double peak_rss_mb = 0;
};

Figures figures_of(const BenchResults& results, const BenchRow& row) {
  Figures f;
  if (!row.ok()) return f;
  f.median = row.median(), f.min = row.min(), f.max = row.max();
  const double base = results.baseline(row.model);
  f.speedup = base > 0 ? f.median / base : 0;
  if (row.predicted) f.predicted = row.predicted->samples_per_s, f.ratio = f.median > 0 ? f.predicted / f.median : 0;
  const MeasuredRun* run = row.median_run();
  f.waiting = waiting_fraction(run->report);
  f.loss = run->final_loss;
  f.peak_rss_mb = static_cast<double>(run->peak_rss_bytes) / 1e6;
  return f;
}

std::string label_of(const BenchRow& row) { return row.strategy + (row.threads == 1 ? " (1 thread)" : ""); }

}  // namespace

bool BenchRow::ok() const {
  return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r.ok; });
}
double BenchRow::median() const {
  const std::vector<double> v = throughputs(*this);
  return v.empty() ? 0 : v[(v.size() - 1) / 2];  // an even count: the lower middle, a figure actually measured
}
double BenchRow::min() const {
  const std::vector<double> v = throughputs(*this);
  return v.empty() ? 0 : v.front();
}
double BenchRow::max() const {
  const std::vector<double> v = throughputs(*this);
  return v.empty() ? 0 : v.back();
}
const MeasuredRun* BenchRow::median_run() const {
  const double m = median();
  for (const MeasuredRun& r : runs)
    if (r.ok && r.samples_per_s == m) return &r;
  return nullptr;
}

double BenchResults::baseline(const std::string& model) const {
  for (const BenchRow& row : rows)
    if (row.model == model && row.threads == 1 && row.strategy == "single" && row.ok()) return row.median();
  return 0;
}

std::string format_bench_table(const BenchResults& results) {
  std::string out;
  char line[512];
  std::string model;
  for (const BenchRow& row : results.rows) {
    if (row.model != model) {
      model = row.model;
      std::snprintf(line, sizeof line, "\n%s, batch %lld\n%-22s %10s %19s %8s %10s %10s %8s %9s %8s\n", model.c_str(),
                    static_cast<long long>(row.batch), "strategy", "samples/s", "[min, max]", "speed-up", "predicted",
                    "pred/meas", "waiting", "peak RSS", "loss");
      out += line;
    }
    if (!row.ok()) {
      out += "  " + label_of(row) + ": FAILED: " + (row.runs.empty() ? "no run" : row.runs.back().error) + "\n";
      continue;
    }
    const Figures f = figures_of(results, row);
    const std::string range = "[" + format("%.1f", f.min) + ", " + format("%.1f", f.max) + "]";
    std::snprintf(line, sizeof line, "%-22s %10.1f %19s %7.2fx %10s %10s %8s %6.0f MB %8.4f\n", label_of(row).c_str(),
                  f.median, range.c_str(), f.speedup, row.predicted ? format("%.1f", f.predicted).c_str() : "-",
                  row.predicted ? format("%.2f", f.ratio).c_str() : "-",
                  f.waiting >= 0 ? format("%.1f%%", 100 * f.waiting).c_str() : "-", f.peak_rss_mb, f.loss);
    out += line;
  }
  out +=
      "\nsamples/s: median of the repeats; speed-up: against one thread on one device; predicted: the event "
      "simulation (as onnxtrain simulate) with node times measured here; waiting: the largest pipeline stage's bubble "
      "(time blocked on a neighbour / "
      "its wall time), or the share of a data-parallel step spent in the all-reduce.\n";
  return out;
}

nlohmann::json bench_json(const BenchResults& results) {
  nlohmann::json runs = nlohmann::json::array();
  for (const BenchRow& row : results.rows) {
    nlohmann::json j = {
        {"model", row.model}, {"strategy", row.strategy}, {"batch", row.batch}, {"threads", row.threads}};
    nlohmann::json repeats = nlohmann::json::array();
    for (const MeasuredRun& r : row.runs) {
      repeats.push_back(r.ok ? nlohmann::json{{"samples_per_s", r.samples_per_s},
                                              {"seconds", r.seconds},
                                              {"peak_rss_bytes", r.peak_rss_bytes},
                                              {"final_loss", r.final_loss},
                                              {"started_at", r.started_at}}
                             : nlohmann::json{{"error", r.error}, {"started_at", r.started_at}});
    }
    if (row.ok()) {
      const Figures f = figures_of(results, row);
      const MeasuredRun& m = *row.median_run();
      nlohmann::json losses = nlohmann::json::array();
      for (const auto& [step, loss] : m.losses) losses.push_back({step, loss});
      j["measured"] = {{"samples_per_s", {{"median", f.median}, {"min", f.min}, {"max", f.max}}},
                       {"speedup_vs_one_thread", f.speedup},
                       {"final_loss", f.loss},
                       {"loss_by_step", losses},
                       {"peak_rss_bytes", m.peak_rss_bytes},
                       {"report", m.report}};
      if (m.mean_staleness >= 0) j["measured"]["mean_staleness"] = m.mean_staleness;
      if (row.predicted) j["ratio_predicted_to_measured"] = f.ratio;
    }
    j["measured_repeats"] = repeats;
    if (row.predicted) {
      j["predicted"] = {{"samples_per_s", row.predicted->samples_per_s},
                        {"basis", row.predicted->basis},
                        {"bubble_fraction", row.predicted->bubble_fraction},
                        {"stage_seconds", row.predicted->stage_seconds},
                        {"stage_memory_bytes", row.predicted->stage_memory_bytes},
                        {"stage_first_nodes", row.predicted->stage_first_nodes}};
    } else {
      j["predicted"] = nullptr;
      j["prediction_error"] = row.prediction_error;
    }
    runs.push_back(j);
  }
  return {{"machine", results.machine}, {"runs", runs}};
}

void write_bench_report(const BenchResults& results, const std::string& dir) {
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) throw Error(dir + ": cannot create the report folder: " + made.message());
  std::string md = "# onnxtrain bench\n\nMachine: " + results.machine.value("cpu", std::string("?")) + ", " +
                   std::to_string(results.machine.value("threads", 0)) + " threads, " +
                   results.machine.value("date", std::string("")) + ", load average " +
                   format("%.2f", results.machine.value("load_average_at_start", -1.0)) + " at start.\n\n```\n" +
                   format_bench_table(results) + "```\n\n## Predictions\n\n";
  std::string csv =
      "model,strategy,threads,batch,samples_per_s_median,min,max,speedup,predicted,ratio_predicted_to_measured,"
      "waiting_fraction,peak_rss_mb,final_loss\n";
  for (const BenchRow& row : results.rows) {
    md += "- " + row.model + " " + label_of(row) + ": " +
          (row.predicted ? row.predicted->basis : "no prediction: " + row.prediction_error) + "\n";
    const Figures f = figures_of(results, row);
    char line[512];
    std::snprintf(line, sizeof line, "%s,%s,%d,%lld,%.3f,%.3f,%.3f,%.4f,%.3f,%.4f,%.4f,%.1f,%.6f\n", row.model.c_str(),
                  row.strategy.c_str(), row.threads, static_cast<long long>(row.batch), f.median, f.min, f.max,
                  f.speedup, f.predicted, f.ratio, f.waiting, f.peak_rss_mb, f.loss);
    csv += line;
  }
  md +=
      "\n## Timelines\n\nChrome traces (open in Perfetto or chrome://tracing): the measured run (pipelines) and, "
      "beside it, the simulated one; one track per stage, replica or link:\n\n";
  for (const BenchRow& row : results.rows) {
    const bool measured =
        !row.runs.empty() && !row.runs.front().trace_path.empty() && fs::exists(row.runs.front().trace_path);
    const bool simulated = row.predicted && row.predicted->sim;
    if (!measured && !simulated) continue;
    nlohmann::json events = nlohmann::json::array();
    if (measured) {
      std::ifstream in(row.runs.front().trace_path);
      const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
      if (!trace.is_discarded() && trace.contains("traceEvents")) events = trace["traceEvents"];
    }
    if (simulated) append_simulation_events(events, *row.predicted->sim, "simulated: " + label_of(row), 2);
    const std::string name = "trace-" + bench_tag(row.model, row.strategy, row.threads) + ".json";
    write_text_file((fs::path(dir) / name).string(), nlohmann::json{{"traceEvents", events}}.dump() + "\n");
    md += "- [" + name + "](" + name + "): " + row.model + " " + label_of(row) + (measured ? "" : " (simulated only)") +
          "\n";
  }
  md += "\nFigures: `tools/plot_bench.py " + (fs::path(dir) / "bench.json").string() + " --out " + dir +
        "` (matplotlib) draws throughput, speed-up, memory per stage and loss for each model.\n";
  write_text_file((fs::path(dir) / "report.md").string(), md);
  write_text_file((fs::path(dir) / "report.csv").string(), csv);
  write_text_file((fs::path(dir) / "bench.json").string(), bench_json(results).dump(2) + "\n");
}

std::string bench_tag(const std::string& model, const std::string& strategy, int threads) {
  std::string tag;
  for (char c : fs::path(model).stem().string() + "-" + strategy + (threads == 1 ? "-1thread" : ""))
    tag += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '-';
  return tag;
}

TempWorkdir::TempWorkdir() {
  std::string pattern = (fs::temp_directory_path() / "onnxtrain-bench-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw Error("bench: cannot make a temporary folder in " + fs::temp_directory_path().string());
  path = pattern;
}

TempWorkdir::~TempWorkdir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace onnxtrain::cli
