// Training on one device: a forward Graph plus a loss and an optimizer become one training step
// (forward + backward as one InferenceSession over the training graph, then the optimizer updates the
// parameter tensors in place) and an evaluation pass (the same parameters, BatchNormalization on its
// running statistics, Dropout off). The engine behind `onnxtrain train`.
//
//   Trainer trainer(model.graph, {.loss = parse_loss_spec("cross-entropy"),
//                                 .optimizer = config, .schedule = {.base_lr = 0.01}});
//   float loss = trainer.train_step(batch.x, batch.y);          // one optimizer step
//   Trainer::Evaluation e = trainer.evaluate(val.inputs, val.labels, 256);
//   write_trained_model(path, out, trainer.trained_initializers());
//
// Parameters are the graph's initializer Tensors, shared (Tensor copies share buffers) by the training
// graph and the evaluation graph; InferenceSession reads initializer data from its graph on every run,
// so an in-place update is what the next run sees. Running variance: ONNX's update (the batch's population
// variance), not yet PyTorch's unbiased one.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/inference_session.h"
#include "executor/optimizer.h"
#include "graph/autodiff/loss.h"
#include "graph/autodiff/training_graph.h"

namespace onnxtrain {

struct TrainerOptions {
  LossSpec loss;
  OptimizerConfig optimizer;
  LrSchedule schedule;
  std::string kernels;  // kernel implementation ("reference"); empty: the fastest
};

// A copy of `graph` (sharing its initializer Tensors) for evaluation: BatchNormalization in inference
// mode (training_mode 0, its running-statistics outputs dropped, also from the graph outputs) and Dropout
// as identity (its training_mode input omitted, which means false).
Graph make_inference_graph(const Graph& graph);

class Trainer {
 public:
  // Throws Error when the loss cannot be attached or a node has no gradient rule.
  Trainer(const Graph& forward, TrainerOptions options);

  // One step on a batch: x (B, ...) float32, y int64 class labels (B) (one-hot float for mse, l1 and
  // bce-with-logits when the model outputs (B, C)). Returns the loss before the update.
  float train_step(const Tensor& x, const Tensor& y);

  struct Evaluation {
    double loss = 0;
    double accuracy = 0;  // argmax of the logits against the labels; NaN when the labels are not classes
    int64_t samples = 0;
  };
  Evaluation evaluate(const Tensor& inputs, const Tensor& labels, int64_t batch);

  // The trained Parameter and State (BatchNorm running statistics) initializers, by name.
  std::map<std::string, Tensor> trained_initializers() const;

  const Optimizer& optimizer() const { return optimizer_; }
  const std::string& input_name() const { return input_; }
  const AttachedLoss& loss() const { return loss_; }
  const TrainingGraph& training_graph() const { return *training_; }
  // BatchNormalization nodes whose running statistics are updated every step.
  int running_stat_nodes() const { return static_cast<int>(running_stats_.size()); }

 private:
  Tensor labels_for(const Tensor& y, int64_t classes) const;

  TrainerOptions options_;
  Graph forward_;  // the model with its loss attached, BatchNormalization in training mode
  AttachedLoss loss_;
  std::unique_ptr<TrainingGraph> training_;  // stable address: the session keeps a reference
  std::unique_ptr<InferenceSession> session_;
  std::unique_ptr<Graph> eval_graph_;
  std::unique_ptr<InferenceSession> eval_session_;
  Optimizer optimizer_;
  std::string input_;
  struct Slot {
    std::string name;
    ValueId value;
    std::string gradient;
  };
  std::vector<Slot> slots_;
  struct RunningStat {
    std::string output;  // the BN node's new running statistic (a graph output)
    ValueId state;       // the State initializer it replaces
  };
  std::vector<RunningStat> running_stats_;
};

}  // namespace onnxtrain
