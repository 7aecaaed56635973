// Pipeline stages as programs: a TrainingGraph (forward nodes, then backward nodes) cut at forward-node
// boundaries into one forward Graph and one backward Graph per stage, with the names of the tensors each
// stage receives and sends. Running the stages one after another (forward 0..N-1, backward N-1..0,
// handing the tensors on by name, every session with the run index the whole graph would have) computes
// what one InferenceSession over the whole training graph computes, bit for bit: the same nodes run in
// the same order on the same inputs (tests/stage_graphs_test.cc).
//
//   Trainer trainer(model.graph, options);   // loss attached, BN in training mode, Dropout seeded
//   const std::vector<int64_t> starts{0, 7};
//   std::vector<StageGraphs> stages = split_training_graph(trainer.training_graph(), starts);
//   InferenceSession fwd(stages[1].forward), bwd(stages[1].backward);  // the sessions keep references:
//                                                                      // don't move `stages` afterwards
//   fwd.set_run_index(step);
//   auto out = fwd.run({recv_activations by name..., forward_data_inputs by name...});
//   // send out[send_activations...] on; keep out[kept...] for the backward; read out[loss], running stats
//   auto grads = bwd.run({kept..., recv_gradients..., backward_data_inputs...});
//
// Ownership: forward node i belongs to the stage whose range holds i; a backward node to the stage of its
// owning forward node (partitioner/cost_model.h owning_forward_node). A gradient Sum node belongs to the
// forward node that made the summed value, so it sits in the earliest stage involved: contributions made
// by later stages' backward graphs are received (and relayed) like any gradient.
//
// Relays: a value made in stage j and read in stage k > j+1 is received and sent on by every stage in
// between: an input and an output of the intermediate stage's forward graph (InferenceSession returns a
// graph input listed as an output as it is, with no copy). Values crossing back (gradients, and the rare
// forward value a backward node of an earlier stage reads) are relayed the same way through the backward
// graphs. A forward value reaches its own stage's backward graph through `kept`, never as a message.
//
// Initializers are copied into every graph that reads them, sharing their Tensors with the training graph
// (an in-place optimizer update is seen by all). Trained ones (a float parameter with a gradient, BN
// running statistics) must be read by one stage only; frozen parameters, buffers and constants may be read
// by several. The model's graph inputs (data, labels) are never relayed: the loader feeds every stage
// that reads one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph/autodiff/training_graph.h"
#include "graph/graph.h"

namespace onnxtrain {

struct StageGraphs {
  int index = 0;
  int64_t first_node = 0, end_node = 0;  // forward nodes [first_node, end_node) of training.graph.order()
  // Forward nodes [first_node, end_node). Inputs: recv_activations, then forward_data_inputs. Outputs:
  // send_activations, kept, then the training graph's outputs made here (the loss, BN running statistics,
  // model outputs such as logits), no name twice.
  Graph forward;
  // The backward nodes owned by those forward nodes, in the training graph's order. Inputs: kept,
  // recv_gradients, then backward_data_inputs. Outputs: send_gradients, the parameter gradients, then other
  // training-graph outputs made here. May have no nodes (its outputs are then pass-through inputs).
  Graph backward;
  // Names of the values crossing the stage's boundaries, in a fixed order (the comm tag index): sorted by
  // the training graph's value id, so stage k's send_activations == stage k+1's recv_activations and stage
  // k's send_gradients == stage k-1's recv_gradients, element for element.
  std::vector<std::string> recv_activations;  // forward-graph inputs received from stage index-1
  std::vector<std::string> send_activations;  // forward-graph outputs sent to stage index+1 (incl. relayed)
  std::vector<std::string> kept;              // forward-graph outputs (made here or received) the backward graph reads
  std::vector<std::string> recv_gradients;    // backward-graph inputs received from stage index+1
  std::vector<std::string> send_gradients;    // backward-graph outputs sent to stage index-1 (incl. relayed)
  std::vector<std::string> data_inputs;       // model graph inputs (data, labels) this stage reads: the union of
  std::vector<std::string> forward_data_inputs, backward_data_inputs;  // those each graph reads (feed exactly these)
  // Trainable initializers of this stage: those the Trainer updates (float, with a gradient), in the
  // order of training.gradients; both graphs share the Tensors with the training graph.
  std::vector<std::string> parameters;
  std::vector<std::pair<std::string, std::string>> parameter_gradients;  // (parameter, its gradient output of
                                                                         // `backward`), parallel to `parameters`
  std::string loss;  // the loss output of `forward` in the stage that makes it (the last); else empty
  // (BN running-stat output of `forward`, the State initializer it replaces), as the Trainer pairs them.
  std::vector<std::pair<std::string, std::string>> running_stats;
};

// stage_starts: the first forward node of each stage (stage_starts[0] == 0), strictly increasing, each
// below training.forward_node_count (no empty stage). Throws Error on bad stage_starts, when a trained
// parameter or running statistic is read by nodes of two stages (tied weights: name and stages given), or
// when a backward node would read a value made by the backward graph of an earlier stage, which runs
// after it (not seen with the rules of graph/autodiff, but checked).
std::vector<StageGraphs> split_training_graph(const TrainingGraph& training, std::span<const int64_t> stage_starts);

}  // namespace onnxtrain
