// Runs a graph's forward pass on the CPU, node by node in topological order, with the kernels of the
// KernelRegistry: the engine behind `onnxtrain run` and the ONNX conformance test. Kernels are prepared
// once per batch size (the batch symbols are bound from the inputs' sizes) and reused by later runs.
// Nodes whose output sizes depend on data computed at run time (a Reshape target, Slice bounds, Range
// limits fed as inputs) are shape-inferred again with those values and prepared on every run.
//
//   InferenceSession session(model.graph);                      // fastest kernels
//   InferenceSession oracle(model.graph, "reference");          // the plain-loop reference kernels
//   std::map<std::string, Tensor> outputs = session.run({{"input", x}});
//   InferenceSession gpu(model.graph, "", Device::cuda(0));     // every node on cuda:0
//
// On a CUDA device the session owns one stream: inputs and initializers are uploaded at the start of a
// run, every kernel is enqueued on the stream with buffers from the device's caching allocator, and the
// graph outputs are downloaded at the end (the one host synchronisation of a run; nodes whose output
// sizes depend on run-time values read their small inputs back, which synchronises too). A node without
// a CUDA kernel is an Error when the session is made, never a silent CPU fallback.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernels/kernel.h"

namespace onnxtrain {

namespace cuda {
class DeviceStream;
}

class InferenceSession {
 public:
  // `implementation` picks one kernel implementation ("reference"); empty: the fastest available.
  explicit InferenceSession(const Graph& graph, std::string implementation = "", Device device = Device::cpu());
  ~InferenceSession();

  // Inputs by graph-input name (all must be given, with the model's dtype and sizes); returns every
  // graph output by name. Throws Error naming the input, node or kernel at fault.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);
  // The same, calling `on_output(name, value)` for each graph output as soon as the node computing it
  // has run (before the later nodes), on the calling thread; for data-parallel training, which starts
  // all-reducing the first gradients while the backward pass computes the others.
  using OutputCallback = std::function<void(const std::string& name, const Tensor& value)>;
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs, const OutputCallback& on_output);

  // Runs are numbered from 0; the number seeds random kernels (Dropout, kernels/kernel.h), so a resumed
  // training run sets the index its interrupted predecessor had reached.
  uint64_t run_index() const { return run_index_; }
  void set_run_index(uint64_t index) { run_index_ = index; }

  // The nodes without a kernel for their dtype on the session's device, as "Op (dtype)"; empty when the
  // graph runs.
  std::vector<std::string> missing_kernels() const;
  const Device& device() const { return device_; }

 private:
  struct PreparedNode {
    NodeId node;
    std::unique_ptr<Kernel> kernel;  // null for a node prepared on every run (data-dependent sizes)
    std::vector<std::vector<int64_t>> output_sizes;
  };

  SymbolBindings bind_inputs(const std::map<std::string, Tensor>& inputs) const;
  std::unique_ptr<Kernel> prepare_node(const Graph& graph, NodeId id, std::vector<std::vector<int64_t>>& output_sizes) const;
  void prepare(const SymbolBindings& bindings);
  // Sizes of an input of the node, and its data when it is small (shapes, bounds) or null.
  using InputFacts = std::function<std::pair<std::vector<int64_t>, const Tensor*>(ValueId)>;
  void infer_with_values(Graph& graph, NodeId id, const InputFacts& input) const;
  Kernel& kernel_for_run(PreparedNode& p, std::optional<Graph>& scratch, const InputFacts& input,
                         std::unique_ptr<Kernel>& per_run) const;
  std::map<std::string, Tensor> run_on_cuda(const std::map<std::string, Tensor>& inputs, const OutputCallback& on_output);
  Tensor allocate(DType dtype, const std::vector<int64_t>& sizes);
  void release(Tensor& tensor, ValueId id);

  const Graph& graph_;
  Device device_;
  std::unique_ptr<cuda::DeviceStream> cuda_stream_;  // a CUDA device's session only
  Graph bound_;  // graph_ with the batch symbols bound
  std::string implementation_;
  std::optional<SymbolBindings> prepared_for_;
  std::vector<PreparedNode> prepared_;
  std::vector<size_t> last_use_;  // per value: index into the node order of its last consumer
  std::map<std::pair<DType, int64_t>, std::vector<Tensor>> free_buffers_;  // by dtype and element count
  uint64_t run_index_ = 0;  // the index of the next run
};

}  // namespace onnxtrain
