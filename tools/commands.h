// The subcommands of the `onnxtrain` CLI, one file each. Each registers itself on the app with its
// options and a callback; tools/onnxtrain.cc lists them in one table.
#pragma once

#include <CLI/CLI.hpp>

namespace onnxtrain::cli {

inline constexpr char kOnnxtrainVersion[] = "0.1.0";  // as project() in CMakeLists.txt says

void add_bench_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_partition_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_version_command(CLI::App& app);

}  // namespace onnxtrain::cli
