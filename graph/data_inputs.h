// One batch's data inputs: the tensors a model's graph inputs are fed, by graph-input name. A model with
// one data input is fed one Tensor, which converts implicitly (its name is left empty and the trainer binds
// it to the model's one input); a model with several (BERT's input_ids, attention_mask, token_type_ids)
// is fed them by name. Every tensor has the same rows (axis 0): the batch.
//
//   trainer.train_step(x, y);                                          // one input
//   trainer.train_step(DataInputs({{"input_ids", ids}, {"attention_mask", mask}}), y);
//   DataInputs half = inputs.slice_rows(0, inputs.rows() / 2);         // a replica's share
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct DataInputs {
  DataInputs() = default;
  DataInputs(Tensor only);                  // NOLINT(google-explicit-constructor): one input converts implicitly
  explicit DataInputs(NamedTensors named);  // Error when a name repeats or the rows differ

  NamedTensors tensors;

  int64_t rows() const;  // axis 0 of every tensor; 0 when there are none
  const Tensor& first() const { return tensors.at(0).second; }
  DataInputs slice_rows(int64_t begin, int64_t end) const;  // rows [begin, end) of each tensor
};

// Rows [begin, end) of t along axis 0, copied (t itself when that is all of it).
Tensor slice_rows(const Tensor& t, int64_t begin, int64_t end);

}  // namespace onnxtrain
