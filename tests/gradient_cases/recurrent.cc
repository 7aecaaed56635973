// Harness cases of RNN, GRU and LSTM (their backward: RecurrentGrad). X (T 3, N 2, I 3), hidden 2: every
// direction, both layouts, GRU with and without linear_before_reset, LSTM's peepholes, initial states and
// sequence_lens (a row shorter than the others keeps its state and writes zeros). PyTorch's exports never
// use peepholes, sequence_lens, layout 1 or GRU's linear_before_reset 0: these cases are their only check
// against finite differences (tests/recurrent_parity_test.cc checks the rest against PyTorch).
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

std::vector<GradientCase> recurrent_gradient_cases() {
  using S = std::string;
  const int64_t hidden = 2;
  auto state = [](int64_t directions, bool batch_major) {
    return normal(batch_major ? std::vector<int64_t>{2, directions, 2} : std::vector<int64_t>{directions, 2, 2});
  };
  // X (T 3, N 2, I 3), or (N, T, I) for layout 1, then W, R and B.
  auto weights = [&](int64_t directions, int64_t gates, bool batch_major = false) {
    return std::vector<HarnessInput>{
        normal(batch_major ? std::vector<int64_t>{2, 3, 3} : std::vector<int64_t>{3, 2, 3}),
        normal({directions, gates * hidden, 3}), normal({directions, gates * hidden, hidden}),
        normal({directions, 2 * gates * hidden})};
  };
  auto with = [](std::vector<HarnessInput> inputs, std::vector<HarnessInput> more) {
    inputs.insert(inputs.end(), more.begin(), more.end());
    return inputs;
  };
  const HarnessInput lengths = values({3, 1}, {2}, DType::Int32);
  std::vector<GradientCase> cases;
  cases.push_back({.label = "RNN forward initial_h",
                   .op_type = "RNN",
                   .attributes = {{"hidden_size", hidden}},
                   .inputs = with(weights(1, 1), {omitted(), state(1, false)}),
                   .outputs = 2});
  cases.push_back({.label = "RNN reverse layout 1 sequence_lens",
                   .op_type = "RNN",
                   .attributes = {{"hidden_size", hidden}, {"direction", S("reverse")}, {"layout", int64_t{1}}},
                   .inputs = with(weights(1, 1, true), {lengths}),
                   .outputs = 2,
                   .opset = 14});
  // nn.RNN(nonlinearity="relu") as TorchScript writes it.
  cases.push_back({.label = "RNN relu bidirectional",
                   .op_type = "RNN",
                   .attributes = {{"hidden_size", hidden},
                                  {"direction", S("bidirectional")},
                                  {"activations", std::vector<std::string>{"Relu", "Relu"}}},
                   .inputs = with(weights(2, 1), {omitted(), state(2, false)}),
                   .outputs = 2});
  cases.push_back({.label = "GRU bidirectional reset before the product",
                   .op_type = "GRU",
                   .attributes = {{"hidden_size", hidden}, {"direction", S("bidirectional")}},
                   .inputs = with(weights(2, 3), {omitted(), state(2, false)}),
                   .outputs = 2});
  cases.push_back({.label = "GRU linear_before_reset sequence_lens",
                   .op_type = "GRU",
                   .attributes = {{"hidden_size", hidden}, {"linear_before_reset", int64_t{1}}},
                   .inputs = with(weights(1, 3), {lengths, state(1, false)}),
                   .outputs = 2});
  cases.push_back(
      {.label = "LSTM peepholes initial states",
       .op_type = "LSTM",
       .attributes = {{"hidden_size", hidden}},
       .inputs = with(weights(1, 4), {omitted(), state(1, false), state(1, false), normal({1, 3 * hidden})}),
       .outputs = 3});
  cases.push_back({.label = "LSTM bidirectional layout 1 sequence_lens peepholes",
                   .op_type = "LSTM",
                   .attributes = {{"hidden_size", hidden}, {"direction", S("bidirectional")}, {"layout", int64_t{1}}},
                   .inputs = with(weights(2, 4, true), {values({2, 3}, {2}, DType::Int32), state(2, true),
                                                        state(2, true), normal({2, 3 * hidden})}),
                   .outputs = 3,
                   .opset = 14});
  cases.push_back({.label = "LSTM without bias, Y_c alone in the loss",
                   .op_type = "LSTM",
                   .attributes = {{"hidden_size", hidden}, {"direction", S("reverse")}},
                   .inputs = {normal({3, 2, 3}), normal({1, 8, 3}), normal({1, 8, 2})},
                   .outputs = 3,
                   .loss_outputs = {2}});
  return cases;
}

}  // namespace onnxtrain::harness
