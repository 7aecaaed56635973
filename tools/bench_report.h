// The results of `onnxtrain bench` and their forms: the console table, the --json document, and the
// --report folder (report.md with the table and each run's details, report.csv one line per row).
//
//   BenchResults results{.machine = {...}};
//   results.rows.push_back(row);                       // one per (model, strategy, thread count)
//   std::printf("%s", format_bench_table(results).c_str());
//   write_bench_report(results, "out/bench");          // report.md, report.csv
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench_predict.h"
#include "tools/bench_run.h"
#include "tools/text_file.h"

namespace onnxtrain::cli {

struct BenchRow {
  std::string model, strategy;
  std::string data;  // the --data every repeat trained on (a synthetic spec)
  int64_t batch = 0;
  int threads = 0;
  std::vector<MeasuredRun> runs;  // the repeats (stops at the first failure)
  std::optional<Prediction> predicted;
  std::string prediction_error;  // why there is no prediction

  bool ok() const;                                  // every repeat ran
  double median() const, min() const, max() const;  // samples/s over the repeats
  const MeasuredRun* median_run() const;            // the repeat with the median throughput
};

struct BenchResults {
  nlohmann::json machine;
  std::vector<BenchRow> rows;  // per model, its one-thread single row first
  // samples/s of the model's one-thread single row (the speed-up's baseline); 0 when it failed.
  double baseline(const std::string& model) const;
};

std::string format_bench_table(const BenchResults& results);
nlohmann::json bench_json(const BenchResults& results);
// "cnn_opset17-gpipe-2x4" (-1thread for the baseline): names a row's files.
std::string bench_tag(const std::string& model, const std::string& strategy, int threads);

// DIR/report.md, DIR/report.csv, DIR/bench.json and DIR/trace-TAG.json per pipeline row (its first
// repeat's timeline); throws Error naming the file that cannot be written.
void write_bench_report(const BenchResults& results, const std::string& dir);

// A folder under the system's temporary directory, removed with everything in it on destruction.
struct TempWorkdir {
  TempWorkdir();
  ~TempWorkdir();
  TempWorkdir(const TempWorkdir&) = delete;
  TempWorkdir& operator=(const TempWorkdir&) = delete;
  std::string path;
};

}  // namespace onnxtrain::cli
