#include "graph/recurrent_cell.h"

namespace onnxtrain {
namespace {

// ONNX's default activations per direction: f (and g, h) of the op's equations.
std::vector<std::string> default_activations(RecurrentCellKind kind) {
  switch (kind) {
    case RecurrentCellKind::Rnn:
      return {"Tanh"};
    case RecurrentCellKind::Gru:
      return {"Sigmoid", "Tanh"};
    case RecurrentCellKind::Lstm:
      return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

bool recurrent_cell_kind(const std::string& op_type, RecurrentCellKind& kind) {
  if (op_type == "RNN")
    kind = RecurrentCellKind::Rnn;
  else if (op_type == "GRU")
    kind = RecurrentCellKind::Gru;
  else if (op_type == "LSTM")
    kind = RecurrentCellKind::Lstm;
  else
    return false;
  return true;
}

std::string read_recurrent_cell(const std::string& op_type, const Attributes& attributes, RecurrentCell& cell) {
  if (!recurrent_cell_kind(op_type, cell.kind)) return "'" + op_type + "' is not RNN, GRU or LSTM";
  cell.hidden = attributes.get_int("hidden_size", 0);
  if (attributes.has("hidden_size") && cell.hidden < 1) {
    return "hidden_size must be positive, got " + std::to_string(cell.hidden);
  }
  const std::string direction = attributes.get_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return "direction must be forward, reverse or bidirectional, got '" + direction + "'";
  }
  cell.directions = direction == "bidirectional" ? 2 : 1;
  cell.reverse = direction == "reverse";
  cell.layout = attributes.get_int("layout", 0);
  if (cell.layout != 0 && cell.layout != 1) return "layout must be 0 or 1, got " + std::to_string(cell.layout);
  cell.linear_before_reset = cell.kind == RecurrentCellKind::Gru && attributes.get_int("linear_before_reset", 0) != 0;
  if (attributes.has("clip")) return "onnxtrain has no clipped cell (the clip attribute); export without it";
  if (attributes.get_int("input_forget", 0) != 0) return "onnxtrain has no coupled input-forget gate (input_forget 1)";
  if (attributes.has("activations")) {
    const auto* given = std::get_if<std::vector<std::string>>(&attributes.at("activations"));
    std::vector<std::string> expected;
    for (int64_t d = 0; d < cell.directions; ++d) {
      for (const std::string& a : default_activations(cell.kind)) expected.push_back(a);
    }
    if (given && cell.kind == RecurrentCellKind::Rnn &&
        *given == std::vector<std::string>(static_cast<size_t>(cell.directions), "Relu")) {
      cell.relu = true;
      return {};
    }
    if (!given || *given != expected) {
      return "onnxtrain has only the default activations (" + joined(expected) + ")" +
             (cell.kind == RecurrentCellKind::Rnn ? std::string(" and Relu") : std::string()) +
             (given ? ", got " + joined(*given) : std::string());
    }
  }
  return {};
}

double recurrent_serial_steps(const RecurrentCell& cell, const Shape& x) {
  if (!x.rank_known || x.rank() != 3) return 0;
  const std::optional<int64_t> steps = x.dims[cell.layout == 0 ? 0 : 1].evaluate({});
  return steps && *steps > 0 ? static_cast<double>(cell.directions * *steps) : 0;
}

}  // namespace onnxtrain
