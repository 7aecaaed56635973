#include "frontend/importer.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "frontend/import_passes.h"
#include "frontend/model_file.h"
#include "frontend/tensor_proto.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

void check_opsets(const onnx::ModelProto& model) {
  int opset = default_opset(model);
  if (opset == 0) return;  // only other domains (ai.onnx.ml, ai.onnx.preview.training): their ops decide
  if (opset < kMinOpset || opset > kMaxOpset) {
    throw Error("opset " + std::to_string(opset) + " of domain ai.onnx is not supported: onnxtrain reads opsets " +
                std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                (opset < kMinOpset ? " (re-export the model with a newer exporter)" : ""));
  }
}

// Debian's ONNX 1.12 checks and infers models of the opsets and IR versions it knows.
bool onnx_library_knows(const onnx::ModelProto& model) {
  return default_opset(model) <= kOnnxLibraryMaxOpset && model.ir_version() <= onnx::Version::IR_VERSION;
}

// Our own structural check, before ONNX's checker and version converter see the model: every graph
// output is a graph input, an initializer or a node's output (ONNX 1.12's converter dereferences a missing
// producer: a 47-byte model with an output nothing makes crashed the importer at opsets 7-12).
void check_graph_outputs_defined(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  std::set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const std::string& out : n.output()) defined.insert(out);
  for (const auto& v : g.output())
    if (!defined.contains(v.name()))
      throw Error("graph output '" + v.name() + "' is made by no node and is neither a graph input nor an initializer");
}

void run_onnx_checker(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(std::string("the ONNX checker rejects the model: ") + e.what());
  }
}

// Old opsets are converted to opset 13 where ONNX's converter can, so fewer op versions reach the schemas;
// when it cannot, the model is kept as it is (onnxtrain's schemas read the older forms too).
void convert_old_opset(onnx::ModelProto& model, ImportedModel& report) {
  int opset = default_opset(model);
  constexpr int kTarget = 13;
  if (opset >= kTarget) return;
  // ONNX 1.12's converter turns Upsample and Resize-10 into a Resize-11 without coordinate attributes, so
  // they would sample half-pixel, not asymmetric as those ops (and ONNX Runtime) do; onnxtrain's schemas and
  // kernels read them as they are (graph/resize_sampling.h).
  for (const auto& node : model.graph().node()) {
    if (opset < 11 && (node.op_type() == "Upsample" || node.op_type() == "Resize") && node.domain().empty()) {
      report.notes.push_back("kept opset " + std::to_string(opset) + ": ONNX's version converter would change how " +
                             node.op_type() + " samples");
      return;
    }
  }
  try {
    model = onnx::version_conversion::ConvertVersion(model, kTarget);
    report.notes.push_back("converted from opset " + std::to_string(opset) + " to " + std::to_string(kTarget) +
                           " with ONNX's version converter");
  } catch (const std::exception& e) {
    report.notes.push_back("kept opset " + std::to_string(opset) + ": ONNX's version converter could not convert it (" +
                           e.what() + ")");
  }
}

// Runs `risky` in a forked child (the parent's memory, copy-on-write) and says whether it returned or threw,
// rather than dying of a signal. For library code that can crash on hostile input (ONNX 1.12's data
// propagation): the crash stays in the child and the parent reports an Error.
// The child of a multithreaded process inherits every lock another thread held at the fork (an allocator's,
// a registry's) and can wait on it forever: under ASan three pipeline tests that import while stages run
// hung so. The child therefore has kChildSeconds; one that runs out (SIGALRM) proves nothing, and `risky`
// then runs here, unprotected, as it would without the fork. (Forking only when single-threaded is not
// enough: libFuzzer's own threads would switch the protection off in the fuzzers.)
bool survives_in_a_child(const std::function<void()>& risky) {
#if defined(__SANITIZE_THREAD__)
  // TSan's fork handling in a multithreaded process is fragile; its tests feed sound models.
  risky();
  return true;
#endif
  constexpr unsigned kChildSeconds = 20;  // a bound for a stuck child; a slow one only makes the pass run twice
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return true;  // cannot fork: run it here as before
  if (pid == 0) {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM})
      std::signal(sig, SIG_DFL);  // no sanitizer report
    ::alarm(kChildSeconds);
    try {
      risky();
    } catch (...) {
    }
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {  // stuck on an inherited lock (or very slow)
    risky();
    return true;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The raw bytes of the model's large initializers, moved out of it (not copied) for as long as this lives,
// then put back. Shape inference reads an initializer's type and dims, and the values only of the small
// ones that give sizes (Reshape's shape, Slice's starts); without this each of its copies of the model
// below copied every weight (100 MB for ResNet-50, 0.2 s of start-up).
class ParkedWeights {
 public:
  explicit ParkedWeights(onnx::ModelProto& model) : graph_(*model.mutable_graph()) {
    for (int i = 0; i < graph_.initializer_size(); ++i) {
      onnx::TensorProto& tensor = *graph_.mutable_initializer(i);
      if (tensor.raw_data().size() < kParkedBytes) continue;
      parked_.push_back({i, std::move(*tensor.mutable_raw_data())});
      tensor.clear_raw_data();
    }
  }
  ~ParkedWeights() {
    for (auto& [index, bytes] : parked_) *graph_.mutable_initializer(index)->mutable_raw_data() = std::move(bytes);
  }
  ParkedWeights(const ParkedWeights&) = delete;
  ParkedWeights& operator=(const ParkedWeights&) = delete;

 private:
  static constexpr size_t kParkedBytes = 64 << 10;
  onnx::GraphProto& graph_;
  std::vector<std::pair<int, std::string>> parked_;
};

OnnxValueInfos run_onnx_shape_inference(onnx::ModelProto& model) {
  const ParkedWeights parked(model);
  try {
    // First without data propagation, on a copy: when a node's inference fails, ONNX 1.12 goes on to the
    // next nodes, and its data propagators dereference the type the failed node never set (a Gather whose
    // axis is out of range, then Unsqueeze, Concat, Reshape, Shape: a segfault). Failing here, they never run.
    onnx::ModelProto probe = model;
    onnx::shape_inference::InferShapes(probe, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/true);
    if (!survives_in_a_child([&] {
          onnx::ModelProto copy = model;  // as the real run below sees it (the probe's copy holds its types)
          onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
        })) {
      throw Error(
          "with data propagation, ONNX 1.12 crashes on this model: a node's inference fails "
          "once the sizes computed from constants are known (e.g. a Split whose sizes do not add up to its axis), "
          "and later nodes read the type it never set. Check the model with "
          "onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True) in a newer ONNX");
    }
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw Error(std::string("ONNX shape inference fails: ") + e.what());
  }
  OnnxValueInfos infos;
  auto add = [&](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type()) return;
    infos[vi.name()] = {dtype_from_onnx_code(vi.type().tensor_type().elem_type()), shape_from_type(vi.type())};
  };
  for (const auto& vi : model.graph().value_info()) add(vi);
  for (const auto& vi : model.graph().output()) add(vi);
  return infos;
}

}  // namespace

SymbolBindings data_input_bindings(const Graph& graph, const std::vector<int64_t>& sizes) {
  SymbolBindings bindings;
  if (graph.inputs.empty()) return bindings;
  const Shape& shape = graph.value(graph.inputs[0]).shape;
  if (!shape.rank_known || shape.rank() != static_cast<int64_t>(sizes.size())) return bindings;
  for (size_t d = 1; d < sizes.size(); ++d)
    if (shape.dims[d].is_symbolic() && shape.dims[d].factor() == 1) bindings[shape.dims[d].symbol_name()] = sizes[d];
  return bindings;
}

SymbolBindings input_dim_bindings(const Graph& graph, const std::map<std::string, std::vector<int64_t>>& sizes) {
  SymbolBindings bindings;
  std::map<std::string, std::string> bound_by;  // symbol -> "input_ids (dimension 1)"
  for (ValueId id : graph.inputs) {
    const Value& v = graph.value(id);
    auto given = sizes.find(v.name);
    if (given == sizes.end() || !v.shape.rank_known || v.shape.rank() != static_cast<int64_t>(given->second.size()))
      continue;
    for (int64_t d = 1; d < v.shape.rank(); ++d) {
      if (!v.shape.dims[d].is_symbolic() || v.shape.dims[d].factor() != 1) continue;
      const std::string symbol = v.shape.dims[d].symbol_name();
      const std::string here =
          "'" + v.name + "' " + Shape::of(given->second).to_string() + " in dimension " + std::to_string(d);
      // An attention mask of another length than the ids: refused here, by both names, where the first
      // step would have blamed whichever input was checked against the last binding.
      if (auto [it, added] = bindings.emplace(symbol, given->second[d]); !added && it->second != given->second[d])
        throw Error("the data's inputs disagree on the model's dimension '" + symbol + "': " + bound_by[symbol] + ", " +
                    here + "; the model gives both that one size");
      bound_by.emplace(symbol, here);
    }
  }
  return bindings;
}

namespace {

bool is_float_tensor(const onnx::TensorProto& t) {
  using P = onnx::TensorProto;
  return t.data_type() == P::FLOAT || t.data_type() == P::DOUBLE || t.data_type() == P::FLOAT16 ||
         t.data_type() == P::BFLOAT16;
}

// The elements of a float tensor; 0 for other types and for dims no loaded model can have.
int64_t float_elements(const onnx::TensorProto& t) {
  if (!is_float_tensor(t)) return 0;
  int64_t n = 1;
  for (int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return 0;
  return n;
}

// a + b, held at INT64_MAX (a hostile file's sizes).
int64_t add_saturating(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
}

// The float elements of `graph`'s initializers and Constant nodes when it is `inside` a body, and of every
// body its nodes hold.
int64_t body_weight_elements(const onnx::GraphProto& graph, bool inside) {
  int64_t n = 0;
  if (inside)
    for (const auto& t : graph.initializer()) n = add_saturating(n, float_elements(t));
  for (const auto& node : graph.node()) {
    for (const auto& a : node.attribute()) {
      if (inside && node.op_type() == "Constant" && a.has_t()) n = add_saturating(n, float_elements(a.t()));
      if (a.has_g()) n = add_saturating(n, body_weight_elements(a.g(), true));
      for (const auto& g : a.graphs()) n = add_saturating(n, body_weight_elements(g, true));
    }
  }
  return n;
}

}  // namespace

ImportedModel import_model(const std::string& path, const ImportOptions& options) {
  ImportedModel report;
  try {
    onnx::ModelProto model = read_model_file(path);
    load_external_data(model, path);
    check_raw_data_sizes(model);
    if (int calls = inline_local_functions(model)) {
      report.notes.push_back("inlined " + std::to_string(calls) + " calls of model-local functions");
    }
    check_opsets(model);
    check_graph_outputs_defined(model);
    OnnxValueInfos onnx_infos;
    make_einsum_outputs_explicit(model);
    if (onnx_library_knows(model)) {
      run_onnx_checker(model);
      convert_old_opset(model, report);
      onnx_infos = run_onnx_shape_inference(model);
    } else {
      report.notes.push_back("opset " + std::to_string(default_opset(model)) + " / IR version " +
                             std::to_string(model.ir_version()) +
                             " is newer than Debian's ONNX library knows: checked with onnxtrain's own schemas");
    }
    if (int sequences = rewrite_split_to_sequence(model, onnx_infos)) {
      report.notes.push_back("rewrote " + std::to_string(sequences) +
                             " SplitToSequence/SequenceAt chains (torch.split in the dynamo exporter) as Split");
    }
    for (const auto& prop : model.metadata_props()) report.metadata[prop.key()] = prop.value();
    report.subgraph_weight_elements = body_weight_elements(model.graph(), false);
    report.graph = graph_from_proto(model, options.batch, options.dims);
    report.graph.info.path = path;
    classify_initializers(report.graph, report.graph.initializers, options.freeze_pattern);
    keep_exporter_buffers_constant(report.graph, exporter_buffers(model));
    // Constant nodes and what folds from them are never trained: PyTorch has no parameter behind them (a
    // LayerNorm, GroupNorm or BatchNorm without affine exports its ones and zeros so), and the written
    // model could not hold a trained value, which replaces initializers only.
    infer_and_fold(report.graph, onnx_infos, report, options.keep_untypable);
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
  return report;
}

}  // namespace onnxtrain
