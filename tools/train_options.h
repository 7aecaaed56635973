// What `onnxtrain train` was asked to do: filled by the command line (train_command.cc), carried out
// by run_training (train_run.cc).
#pragma once

#include <cstdint>
#include <string>

namespace onnxtrain::cli {

struct TrainOptions {
  std::string model, data = "fashion-mnist", output, optimizer = "momentum", schedule = "constant";
  std::string loss = "cross-entropy", metrics, kernels, running_variance = "unbiased", dump_gradients;
  std::string normalize = "mean-std";
  std::string checkpoint_dir, test_data;  // test_data: "" = the source's test split, "none"
  int64_t epochs = 1, batch = 64, warmup_steps = 0, limit_batches = 0, log_every = 100;
  int64_t checkpoint_every = 0, keep_checkpoints = 3;
  double lr = 0.01, momentum = 0.9, weight_decay = 0, validation = 0.1;
  uint64_t seed = 0;
  bool momentum_given = false, resume = false;
};

// Trains as `o` says and writes o.output. Throws Error for bad input; returns the process exit code
// (130 when SIGINT stopped the run after writing a checkpoint).
int run_training(const TrainOptions& o);

}  // namespace onnxtrain::cli
