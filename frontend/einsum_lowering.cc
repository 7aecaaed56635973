// Einsum lowered to the ops onnxtrain trains (einsum_lowering.h).
#include "frontend/einsum_lowering.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "frontend/import_passes.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {

namespace {

// A label: a letter's code, or kEllipsis + k for the k-th axis the ellipsis stands for (numbered from the
// left of the widest ellipsis, so operands of fewer such axes line up on the right, as numpy broadcasts).
using Label = int;
using Labels = std::vector<Label>;
constexpr Label kEllipsis = 1000;

[[noreturn]] void refuse(const Node& n, const std::string& why) {
  throw Error("Einsum '" + n.attr_string("equation", "") + "': " + why).at_node(n.name, n.op_type, n.domain, n.opset);
}

// The labels of one term of the equation, its ellipsis (if any) covering `rank` minus the letters.
Labels parse_term(const Node& n, const std::string& term, int64_t rank, int64_t widest_ellipsis) {
  Labels letters;
  int64_t ellipsis_at = -1;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      if (ellipsis_at >= 0) refuse(n, "a term has two ellipses");
      ellipsis_at = static_cast<int64_t>(letters.size());
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      letters.push_back(term[i]);
    } else {
      refuse(n, std::string("'") + term[i] + "' is not a letter");
    }
  }
  const int64_t covered = rank - static_cast<int64_t>(letters.size());
  if (rank >= 0 && (covered < 0 || (covered > 0 && ellipsis_at < 0))) {
    refuse(n, "the term '" + term + "' has " + std::to_string(letters.size()) + " labels for an input of rank " +
                  std::to_string(rank));
  }
  if (ellipsis_at < 0) return letters;
  Labels labels(letters.begin(), letters.begin() + ellipsis_at);
  const int64_t count = rank >= 0 ? covered : widest_ellipsis;
  for (int64_t k = widest_ellipsis - count; k < widest_ellipsis; ++k) labels.push_back(kEllipsis + static_cast<int>(k));
  labels.insert(labels.end(), letters.begin() + ellipsis_at, letters.end());
  return labels;
}

std::vector<std::string> split_terms(const std::string& lhs) {
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',')
      terms.emplace_back();
    else
      terms.back().push_back(c);
  }
  return terms;
}

bool contains(const Labels& labels, Label l) { return std::find(labels.begin(), labels.end(), l) != labels.end(); }

// Builds the lowered nodes one by one, each typed as it is added.
class Lowering {
 public:
  Lowering(Graph& g, const Node& einsum) : g_(g), name_(einsum.name), einsum_(einsum) {
    const auto it = g.info.opsets.find("");
    opset_ = std::max(it == g.info.opsets.end() ? 13 : it->second, 12);
  }

  ValueId emit(const std::string& op, std::vector<ValueId> inputs, Attributes attributes = {}) {
    const ValueId out = g_.add_value({.name = g_.unused_value_name(name_ + "/" + op)});
    const NodeId id = g_.add_node({.name = g_.value(out).name,
                                   .op_type = op,
                                   .opset = opset_,
                                   .inputs = std::move(inputs),
                                   .outputs = {out},
                                   .attributes = std::move(attributes)});
    infer_node(g_, id, *OpRegistry::builtin().find("", op));
    return out;
  }

  ValueId ints(const std::vector<int64_t>& values) {
    Tensor t = Tensor::vector_int64(values);
    const ValueId v = g_.add_value({.name = g_.unused_value_name(name_ + "/ints"),
                                    .dtype = DType::Int64,
                                    .shape = Shape::of(t.sizes()),
                                    .role = ValueRole::Constant,
                                    .data = t});
    std::vector<Dim> known;
    for (int64_t x : values) known.emplace_back(x);
    g_.value(v).known = std::move(known);
    g_.initializers.push_back(v);
    return v;
  }

  // Axes as an input from opset 13 (ReduceSum, Squeeze, Unsqueeze), as an attribute before.
  ValueId with_axes(const std::string& op, ValueId x, const std::vector<int64_t>& axes, Attributes attributes = {}) {
    if (opset_ >= 13) return emit(op, {x, ints(axes)}, std::move(attributes));
    attributes["axes"] = axes;
    return emit(op, {x}, std::move(attributes));
  }

  ValueId transpose(ValueId x, const Labels& from, const Labels& to) {
    std::vector<int64_t> perm;
    for (Label l : to) perm.push_back(std::find(from.begin(), from.end(), l) - from.begin());
    std::vector<int64_t> identity(perm.size());
    std::iota(identity.begin(), identity.end(), int64_t{0});
    return perm == identity ? x : emit("Transpose", {x}, {{"perm", perm}});
  }

  // Sums `x` (labelled `labels`) over the labels not in `keep`; `labels` then holds those kept.
  ValueId sum_out(ValueId x, Labels& labels, const std::set<Label>& keep) {
    std::vector<int64_t> axes;
    Labels kept;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (keep.count(labels[i]))
        kept.push_back(labels[i]);
      else
        axes.push_back(static_cast<int64_t>(i));
    }
    labels = kept;
    return axes.empty() ? x : with_axes("ReduceSum", x, axes, {{"keepdims", int64_t{0}}});
  }

  // The size of label `l` of `x` (labelled `labels`), or -1 when it is not a number.
  int64_t size_of(ValueId x, const Labels& labels, Label l) const {
    const Dim& d = g_.value(x).shape.dims[std::find(labels.begin(), labels.end(), l) - labels.begin()];
    return d.is_static() ? d.value() : -1;
  }

  // The Reshape target that keeps the `batch` leading axes (0: copy) and lays out `groups` of labels as one
  // axis each (their product; -1 for the one group whose sizes are not all numbers).
  std::vector<int64_t> target(ValueId x, const Labels& labels, size_t batch, const std::vector<Labels>& groups) {
    std::vector<int64_t> shape(batch, 0);
    bool inferred = false;
    for (const Labels& group : groups) {
      int64_t product = 1;
      for (Label l : group) {
        const int64_t s = size_of(x, labels, l);
        product = s < 0 || product < 0 ? -1 : product * s;
      }
      if (product < 0 && inferred) refuse_lowering("more than one group of its axes has a size that is not a number");
      inferred = inferred || product < 0;
      shape.push_back(product);
    }
    return shape;
  }

  ValueId reshape(ValueId x, const std::vector<int64_t>& shape) { return emit("Reshape", {x, ints(shape)}); }

  [[noreturn]] void refuse_lowering(const std::string& why) const { refuse(einsum_, why); }

  // The sizes of `x`'s axes `labels_wanted` (labelled `labels`) as a 1-D int64 value: Shape then Gather,
  // which fold to numbers or symbols at import.
  ValueId dims_of(ValueId x, const Labels& labels, const Labels& wanted) {
    std::vector<int64_t> at;
    for (Label l : wanted) at.push_back(std::find(labels.begin(), labels.end(), l) - labels.begin());
    return emit("Gather", {emit("Shape", {x}), ints(at)}, {{"axis", int64_t{0}}});
  }

 private:
  Graph& g_;
  std::string name_;
  const Node& einsum_;
  int opset_ = 13;
};

struct Operand {
  ValueId value;
  Labels labels;
};

// A·B as one batched MatMul: A to (batch, a-only, contracted) and B to (batch, contracted, b-only), each
// group of free or contracted axes flattened into one (or an axis of 1 for an empty group), and the
// product back to (batch, a-only, b-only).
Operand contract(Lowering& low, Operand a, Operand b, const std::set<Label>& needed) {
  Labels batch, a_only, b_only, contracted;
  for (Label l : a.labels) {
    if (!contains(b.labels, l))
      a_only.push_back(l);
    else if (needed.count(l))
      batch.push_back(l);
    else
      contracted.push_back(l);
  }
  for (Label l : b.labels)
    if (!contains(a.labels, l)) b_only.push_back(l);
  auto join = [](std::initializer_list<const Labels*> parts) {
    Labels all;
    for (const Labels* p : parts) all.insert(all.end(), p->begin(), p->end());
    return all;
  };
  const Labels a_order = join({&batch, &a_only, &contracted}), b_order = join({&batch, &contracted, &b_only});
  ValueId x = low.transpose(a.value, a.labels, a_order), y = low.transpose(b.value, b.labels, b_order);
  const size_t k = batch.size();
  // A group of one axis is already in place: the Reshape lays out the others (several axes as one, none
  // as an axis of 1).
  auto single = [](const Labels& l) { return l.size() == 1; };
  if (!single(a_only) || !single(contracted)) x = low.reshape(x, low.target(x, a_order, k, {a_only, contracted}));
  if (!single(contracted) || !single(b_only)) y = low.reshape(y, low.target(y, b_order, k, {contracted, b_only}));
  Operand result{low.emit("MatMul", {x, y}), join({&batch, &a_only, &b_only})};
  if (single(a_only) && single(b_only)) return result;
  std::vector<Labels> axes;
  for (Label l : a_only) axes.push_back({l});
  for (Label l : b_only) axes.push_back({l});
  // The free axes' sizes, from the operands (the product holds them flattened): numbers where they are, else
  // the operands' own sizes through Shape and Gather (a Linear over a sequence, "btd,de->bte", has a batch
  // and a length of symbols).
  std::vector<int64_t> shape(k, 0);
  int unknown = 0;
  for (Label l : join({&a_only, &b_only})) {
    const int64_t size = contains(a_only, l) ? low.size_of(a.value, a.labels, l) : low.size_of(b.value, b.labels, l);
    unknown += size < 0 ? 1 : 0;
    shape.push_back(size);
  }
  if (unknown > 1) {
    std::vector<ValueId> parts;
    if (k > 0) parts.push_back(low.dims_of(result.value, result.labels, batch));
    if (!a_only.empty()) parts.push_back(low.dims_of(a.value, a.labels, a_only));
    if (!b_only.empty()) parts.push_back(low.dims_of(b.value, b.labels, b_only));
    result.value = low.emit("Reshape", {result.value, low.emit("Concat", parts, {{"axis", int64_t{0}}})});
    return result;
  }
  result.value = low.reshape(result.value, shape);
  return result;
}

}  // namespace

void lower_einsum(Graph& g, NodeId id) {
  const Node einsum = g.node(id);
  std::string equation;
  for (char c : einsum.attr_string("equation", ""))
    if (c != ' ') equation.push_back(c);
  const size_t arrow = equation.find("->");
  const std::vector<std::string> terms = split_terms(equation.substr(0, arrow));
  if (terms.size() != einsum.inputs.size() || einsum.outputs.size() != 1)
    refuse(einsum, std::to_string(terms.size()) + " terms for " + std::to_string(einsum.inputs.size()) + " inputs");

  std::vector<Operand> operands;
  int64_t widest = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Shape& s = g.value(einsum.inputs[i]).shape;
    if (!s.rank_known) refuse(einsum, "input " + std::to_string(i) + " has no known rank");
    size_t letters = 0;
    for (char c : terms[i]) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    widest = std::max(widest, s.rank() - static_cast<int64_t>(letters));
  }
  std::map<Label, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    Labels labels = parse_term(einsum, terms[i], g.value(einsum.inputs[i]).shape.rank(), widest);
    for (Label l : labels) {
      if (std::count(labels.begin(), labels.end(), l) > 1)
        refuse(einsum, "a label repeated within one term (a diagonal or trace) is not lowered yet");
      ++uses[l];
    }
    operands.push_back({einsum.inputs[i], labels});
  }
  // The import wrote implicit outputs out (make_einsum_outputs_explicit).
  if (arrow == std::string::npos) refuse(einsum, "the equation has no explicit output");
  const Labels output = parse_term(einsum, equation.substr(arrow + 2), -1, widest);
  for (Label l : output)
    if (!uses.count(l)) refuse(einsum, std::string("the output label '") + static_cast<char>(l) + "' is in no input");

  // Nodes added before a refusal read the inputs and feed nothing: the import's dead-node pass drops them.
  Lowering low(g, einsum);
  // Labels read by the output or by operand j or later.
  auto needed_from = [&](size_t j) {
    std::set<Label> needed(output.begin(), output.end());
    for (size_t k = j; k < operands.size(); ++k) needed.insert(operands[k].labels.begin(), operands[k].labels.end());
    return needed;
  };
  for (size_t i = 0; i < operands.size(); ++i) {
    std::set<Label> keep = needed_from(i + 1);
    for (size_t k = 0; k < i; ++k) keep.insert(operands[k].labels.begin(), operands[k].labels.end());
    operands[i].value = low.sum_out(operands[i].value, operands[i].labels, keep);
  }
  while (operands.size() > 1) {
    Operand merged = contract(low, operands[0], operands[1], needed_from(2));
    operands.erase(operands.begin(), operands.begin() + 2);
    operands.insert(operands.begin(), merged);
  }
  Operand& last = operands[0];
  ValueId result = low.sum_out(last.value, last.labels, std::set<Label>(output.begin(), output.end()));
  result = low.transpose(result, last.labels, output);
  if (std::find(einsum.inputs.begin(), einsum.inputs.end(), result) != einsum.inputs.end())
    result = low.emit("Identity", {result});  // nothing to do ("ij->ij"): the output still needs a node

  // The last node writes the Einsum's own output value, which its readers and the graph outputs name.
  const ValueId out = einsum.outputs[0];
  g.remove_node(id);
  const NodeId producer = g.value(result).producer;
  g.node(producer).outputs[0] = out;
  Value& v = g.value(out);
  v.producer = producer;
  v.dtype = g.value(result).dtype;
  v.shape = g.value(result).shape;
}

void make_einsum_outputs_explicit(onnx::ModelProto& model) {
  for (onnx::NodeProto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Einsum" || !(node.domain().empty() || node.domain() == "ai.onnx")) continue;
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.name() != "equation" || a.s().find("->") != std::string::npos) continue;
      std::map<char, int> uses;
      bool ellipsis = false;
      for (size_t i = 0; i < a.s().size(); ++i) {
        if (a.s().compare(i, 3, "...") == 0) ellipsis = true;
        if (std::isalpha(static_cast<unsigned char>(a.s()[i]))) ++uses[a.s()[i]];
      }
      std::string output = ellipsis ? "..." : "";
      for (const auto& [letter, count] : uses)
        if (count == 1) output.push_back(letter);
      a.set_s(a.s() + "->" + output);
    }
  }
}

}  // namespace onnxtrain
