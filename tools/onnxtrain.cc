// onnxtrain: train ONNX models. One binary, subcommands; exit code 0 on success, 1 on a user error
// (the message names the file and node; also a path that cannot be used), 2 on bad usage, 3 an internal
// error (a bug).
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "graph/cpu_budget.h"
#include "graph/error.h"
#include "graph/host_resources.h"
#include "graph/spin_then_wait.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/config_file.h"

int main(int argc, char** argv) {
  CLI::App app{
      "onnxtrain: trains ONNX models exported from PyTorch or any other framework.\n"
      "Run `onnxtrain COMMAND --help` for the options of a command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("onnxtrain ") + onnxtrain::cli::kOnnxtrainVersion);
  onnxtrain::cli::add_bench_command(app);
  onnxtrain::cli::add_eval_command(app);
  onnxtrain::cli::add_export_command(app);
  onnxtrain::cli::add_inspect_command(app);
  onnxtrain::cli::add_partition_command(app);
  onnxtrain::cli::add_run_command(app);
  onnxtrain::cli::add_simulate_command(app);
  onnxtrain::cli::add_train_command(app);
  onnxtrain::cli::add_version_command(app);

  // The command argv[1] names (null without one); `onnxtrain trian`: CLI11 would say only that a subcommand
  // is required.
  std::vector<std::string> names;
  const CLI::App* command = nullptr;
  for (const CLI::App* candidate : app.get_subcommands({})) {
    names.push_back(candidate->get_name());
    if (argc > 1 && candidate->get_name() == argv[1]) command = candidate;
  }
  if (argc > 1 && argv[1][0] != '-' && command == nullptr) {
    std::cerr << "onnxtrain: " << onnxtrain::cli::not_one_of("command", argv[1], names)
              << "\nRun `onnxtrain --help` for the commands.\n";
    return 2;
  }
  // The default thread count: the CPUs this process may use, its cgroup's quota included, which libgomp's
  // own default (the affinity mask) ignores. OMP_NUM_THREADS, when set, decides.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(onnxtrain::cpu_budget().cpus);
  // The first sample of how busy other processes keep the CPUs, so that the threads' first waits, after the
  // model is read, already know whether spinning pays (graph/spin_then_wait.h).
  onnxtrain::start_spin_wait_policy();
  try {
    // --config FILE: the file's options go in before the command line's (tools/config_file.h).
    std::vector<std::string> args =
        onnxtrain::cli::expand_config_file(std::vector<std::string>(argv, argv + argc), command);
    if (command != nullptr) {
      const std::string unknown =
          onnxtrain::cli::unknown_option_message(*command, std::vector<std::string>(args.begin() + 2, args.end()));
      if (!unknown.empty()) {
        std::cerr << "onnxtrain: " << unknown << "\n";
        return 2;
      }
    }
    args.erase(args.begin());                // the program name
    std::reverse(args.begin(), args.end());  // CLI11 takes the tokens last first
    app.parse(args);
  } catch (const CLI::RuntimeError& e) {  // a command that ends early on purpose (train on SIGINT: 130)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const onnxtrain::Error& e) {
    std::cerr << "onnxtrain: error: " << e.describe() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {  // a path given that cannot be used
    std::cerr << "onnxtrain: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // std::bad_alloc, or a thread that cannot start (std::system_error EAGAIN/ENOMEM): the run is too big
    // for this machine or its limits (ulimit -v), not a bug.
    if (const auto oom = onnxtrain::out_of_resources_message(e)) {
      std::cerr << "onnxtrain: error: " << *oom << "\n";
      return 1;
    }
    std::cerr << "onnxtrain: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
