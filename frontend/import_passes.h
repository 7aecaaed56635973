// The importer's passes (frontend-internal), in the order import_model runs them.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/importer.h"

namespace onnxtrain {

// Shapes ONNX's own inference found, by value name (used for ops onnxtrain has no schema for).
struct OnnxValueInfo {
  DType dtype = DType::Undefined;
  Shape shape = Shape::unknown_rank();
};
using OnnxValueInfos = std::map<std::string, OnnxValueInfo>;

Shape shape_from_type(const onnx::TypeProto& type);

// Replaces SplitToSequence + SequenceAt chains with static chunk sizes and positions by Split + Identity
// (frontend/sequence_rewrite.cc); returns how many sequences it rewrote.
int rewrite_split_to_sequence(onnx::ModelProto& model, const OnnxValueInfos& infos);

// Writes out the implicit output of every Einsum equation of the main graph ("ij,jk" becomes "ij,jk->ik": the
// ellipsis, then the letters used once, by character code, as numpy), before ONNX's checker and inference
// see them: Debian's ONNX library aborts on an implicit output with an uppercase letter (einsum_lowering.cc).
void make_einsum_outputs_explicit(onnx::ModelProto& model);

// ModelProto → Graph: values, nodes (typed ids), attributes, graph inputs/outputs; sorts the nodes and
// refuses missing inputs, duplicate outputs and cycles. Leading symbolic dims of inputs are recorded as
// batch symbols and bound to `batch` when given.
// `dims` binds other symbolic input dims by name.
Graph graph_from_proto(const onnx::ModelProto& model, std::optional<int64_t> batch, const SymbolBindings& dims = {});

// Sets the role of each given initializer (parameter, state, buffer, constant) from the input kinds of
// the ops that consume it, and freezes parameters whose names match `freeze_pattern`.
void classify_initializers(Graph& graph, const std::vector<ValueId>& initializers, const std::string& freeze_pattern);

// The initializers the exporter marked as buffers, not parameters (frontend/exporter_buffers.cc), and
// what makes them never trained: Constant role (they may fold).
std::set<std::string> exporter_buffers(const onnx::ModelProto& model);
void keep_exporter_buffers_constant(Graph& graph, const std::set<std::string>& buffers);

// Shape inference and constant folding in one topological sweep, then dead node removal. Ops without an
// onnxtrain schema that ONNX knows get their shapes from `onnx_infos` and are listed in the report.
// What folds (Constant nodes included) becomes a Constant value, never trained. `keep_untypable`:
// ImportOptions::keep_untypable.
void infer_and_fold(Graph& graph, const OnnxValueInfos& onnx_infos, ImportedModel& report, bool keep_untypable);

}  // namespace onnxtrain
