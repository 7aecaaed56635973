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
// On a CUDA device the session runs on the stream of a DeviceInitializerStore (executor/
// device_initializers.h; its own unless one is given): the initializers are device-resident, uploaded at
// their first use and kept across runs (again only after initializers_changed(), or when the store is
// told a host copy changed), inputs are uploaded at the start of a run, every kernel is enqueued on the
// stream with buffers from the device's caching allocator, and the graph outputs are downloaded at the
// end (the one host synchronisation of a run; nodes whose output sizes depend on run-time values read
// their small inputs back, which synchronises too). Outputs named in `keep_on_device` stay in device
// memory instead (a trainer's gradients, for the optimizer step on the device). Sessions given the same
// store (a Trainer's training and evaluation sessions) share the device copies and the stream. A node
// without a CUDA kernel is an Error when the session is made, never a silent CPU fallback.
//
//   auto store = std::make_shared<DeviceInitializerStore>(0);
//   InferenceSession train(training_graph, "", Device::cuda(0), store), eval(eval_graph, "", Device::cuda(0), store);
//   std::map<std::string, DeviceTensor> grads;
//   auto host_outputs = train.run(inputs, {"w_grad"}, grads);   // w_grad stays on cuda:0
//   ... host copies of the initializers overwritten ...;  train.initializers_changed();
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "executor/cuda_run_profile.h"
#include "executor/device_initializers.h"
#include "graph/graph.h"
#include "kernels/kernel.h"

namespace onnxtrain {

class InferenceSession {
 public:
  // `implementation` picks one kernel implementation ("reference"); empty: the fastest available.
  // On a CUDA device `initializers` (on that device) holds the device copies and the stream; null: the
  // session makes its own. Ignored on the CPU.
  explicit InferenceSession(const Graph& graph, std::string implementation = "", Device device = Device::cpu(),
                            std::shared_ptr<DeviceInitializerStore> initializers = nullptr);
  ~InferenceSession();

  // Inputs by graph-input name (all must be given, with the model's dtype and sizes); returns every
  // graph output by name. Throws Error naming the input, node or kernel at fault.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);
  // The same, calling `on_output(name, value)` for each graph output as soon as the node computing it
  // has run (before the later nodes), on the calling thread; for data-parallel training, which starts
  // all-reducing the first gradients while the backward pass computes the others.
  using OutputCallback = std::function<void(const std::string& name, const Tensor& value)>;
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs, const OutputCallback& on_output);
  // CPU: the same, but the graph outputs named in `into` go into the caller's buffers instead of fresh
  // ones and are not returned: written, or added to what the buffers hold when `add` (a pipeline stage's
  // parameter gradients summed over the micro-batches of a mini-batch in place, without a gradient-sized
  // temporary and a separate pass per micro-batch). Each buffer is float32 with the output's element
  // count. A kernel that sums its output itself does (Kernel::sums_output: a convolution whose weight
  // gradient is mostly zeros sums only its taps, in a buffer of its own until finish_sums); for the others
  // the session adds the output after the node has run. Throws Error naming an output that is not the
  // graph's or a buffer that does not fit.
  std::map<std::string, Tensor> run_into(const std::map<std::string, Tensor>& inputs,
                                         const std::map<std::string, Tensor>& into, bool add);
  // Ends the sums of run_into: the taps kernels kept (Stream::OutputSum) go into the buffers now. Call it
  // after the last run of a sum, before reading the buffers; the next run_into without `add` starts anew.
  void finish_sums();
  // Lets kernels defer the products they sum to finish_sums (Stream::DeferredProduct): the caller reads
  // no summed buffer before it, and sets this only between sums. Off by default.
  void defer_summed_products(bool on) { defers_sums_ = on; }
  // The taps a kernel keeps of the sum going into `buffer` (its layout says where they go), until
  // finish_sums or the next sum; null where the buffer holds the sum itself. For a caller that reads the
  // taps instead (DataParallelTrainer's sharded step).
  const Stream::OutputSum* kept_sum(const void* buffer) const;
  // CUDA only: the same as run(inputs), but the graph outputs named in `keep_on_device` are not downloaded: they are
  // returned in `device_outputs` (by name, in device memory on the session's stream); the others come back
  // as host Tensors after the run's one synchronisation. Throws Error on a CPU session or for a name that
  // is not a graph output.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs,
                                    const std::set<std::string>& keep_on_device,
                                    std::map<std::string, DeviceTensor>& device_outputs);
  // CUDA only: the same, with the inputs named in `device_inputs` already in device memory (the others
  // in `inputs`): read in place on the session's device, copied first (a peer copy) from another device.
  // Their contents must be complete when the run starts (made by work on this session's stream, or by
  // work the host waited for: a pipeline stage whose run ended). The run waits for its copies before it
  // returns, so the caller may free them then.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs,
                                    const std::map<std::string, const DeviceTensor*>& device_inputs,
                                    const std::set<std::string>& keep_on_device,
                                    std::map<std::string, DeviceTensor>& device_outputs);

  // Frees the CPU buffers kept for reuse by later runs (the pool of released intermediate values), so that
  // another session (an evaluation between training epochs) or the writing of a model does not add its
  // memory to theirs. The next run allocates afresh. Nothing to do on a CUDA device.
  void release_buffers() { free_buffers_.clear(); }
  // Takes back outputs of an earlier run the caller is done with, for the outputs of later runs: a
  // pipeline stage's parameter gradients, once accumulated, and its kept activations, once the backward
  // pass read them, are as large every micro-batch, and fresh buffers cost a page fault per 4 KiB (gpipe
  // over 2 stages on ResNet-18: 210 000 faults, a quarter of the run). A tensor whose buffer some other
  // tensor still shares is only dropped. CPU sessions; a CUDA session drops them all.
  void recycle(Tensor&& tensor);

  // The host copies of the initializers changed (a restore): a CUDA session uploads them again at the
  // next run, as does every session sharing its store. Nothing to do on the CPU, which reads them on
  // every run.
  void initializers_changed();
  // A CUDA session's device initializers (shared with the sessions given the same store); null on the CPU.
  const std::shared_ptr<DeviceInitializerStore>& device_initializers() const { return device_initializers_; }

  // Runs are numbered from 0; the number seeds random kernels (Dropout, kernels/kernel.h), so a resumed
  // training run sets the index its interrupted predecessor had reached.
  uint64_t run_index() const { return run_index_; }
  void set_run_index(uint64_t index) { run_index_ = index; }
  // The rows of the mini-batch the next runs compute (a micro-batch, a replica's slice; rows 0: all of
  // it), so that a row draws the same Dropout mask whatever split computes it (Stream::set_rows).
  void set_rows(uint64_t first_row, int64_t rows) {
    first_row_ = first_row;
    rows_ = rows;
  }

  // Values kernels derive from the initializers (weight taps, transposes: Stream::derived) go into `store`
  // after each CPU run and are given to the next runs, of this session and of every session given the same
  // store, instead of being derived again. The caller clears the store whenever an initializer's content
  // changes (a pipeline stage between weight updates: executor/pipeline/stage_worker.h); null, the
  // default, carries nothing.
  void carry_weight_derived_values(std::shared_ptr<Stream::DerivedMap> store) { carried_ = std::move(store); }

  // The nodes without a kernel for their dtype on the session's device, as "Op (dtype)"; empty when the
  // graph runs.
  std::vector<std::string> missing_kernels() const;
  const Device& device() const { return device_; }

 private:
  struct PreparedNode {
    NodeId node;
    std::unique_ptr<Kernel> kernel;  // null for a node prepared on every run (data-dependent sizes)
    std::vector<std::vector<int64_t>> output_sizes;
    bool views_input = false;  // the output may be the input's buffer under new sizes (views_input_of)
  };
  // Whether a node only gives its input new sizes (Reshape, Flatten, Squeeze, Unsqueeze, Identity) and
  // both sides are the run's own values: the input neither a weight nor the caller's (an in-place update,
  // or the caller, would change the view too), the output no graph output. Its output is then the input's
  // buffer, not a copy.
  bool views_input_of(NodeId id) const;
  bool is_caller_input(ValueId id) const;  // a graph input: the caller's tensor, never pooled or viewed
  void release_inputs_after(const Node& node, size_t index, std::vector<Tensor>& values, Stream& stream);

  // The batch symbols from the inputs' element types and sizes; Error naming an input that is missing,
  // unknown or does not fit the model.
  SymbolBindings bind_inputs(const std::map<std::string, TensorDesc>& inputs) const;
  static std::map<std::string, TensorDesc> descs_of(const std::map<std::string, Tensor>& inputs);
  std::unique_ptr<Kernel> prepare_node(const Graph& graph, NodeId id,
                                       std::vector<std::vector<int64_t>>& output_sizes) const;
  void prepare(const SymbolBindings& bindings);
  void prepare_kernels();  // of bound_, at the current OpenMP thread count
  void use_kernels_for_threads(int threads);
  // Sizes of an input of the node, and its data when it is small (shapes, bounds) or null.
  using InputFacts = std::function<std::pair<std::vector<int64_t>, const Tensor*>(ValueId)>;
  void infer_with_values(Graph& graph, NodeId id, const InputFacts& input) const;
  Kernel& kernel_for_run(PreparedNode& p, std::optional<Graph>& scratch, const InputFacts& input,
                         std::unique_ptr<Kernel>& per_run) const;
  std::map<std::string, Tensor> run_on_cuda(const std::map<std::string, Tensor>& inputs,
                                            const std::map<std::string, const DeviceTensor*>& device_inputs,
                                            const OutputCallback& on_output,
                                            const std::set<std::string>* keep_on_device,
                                            std::map<std::string, DeviceTensor>* device_outputs);
  std::map<std::string, Tensor> run_on_cpu(const std::map<std::string, Tensor>& inputs, const OutputCallback& on_output,
                                           const std::map<std::string, Tensor>& into, bool add);
  // Per value: the caller's buffer `into` names for it (a graph output), else null; Error for a misfit.
  std::vector<const Tensor*> targets_of(const std::map<std::string, Tensor>& into) const;
  Tensor allocate(DType dtype, const std::vector<int64_t>& sizes);
  void release(Tensor& tensor, ValueId id);

  const Graph& graph_;
  Device device_;
  std::shared_ptr<DeviceInitializerStore> device_initializers_;  // a CUDA device's session only: copies, stream
  Graph bound_;                                                  // graph_ with the batch symbols bound
  std::string implementation_;
  std::optional<SymbolBindings> prepared_for_;
  std::vector<PreparedNode> prepared_;
  int prepared_threads_ = 0;                                     // the OpenMP threads prepared_ was made for
  std::map<int, std::vector<PreparedNode>> kernels_by_threads_;  // other thread counts' kernels, same bindings
  std::vector<size_t> last_use_;  // per value: index into the node order of its last consumer
  std::vector<bool> consumed_;    // per value: some node reads it
  std::map<std::pair<DType, int64_t>, std::vector<Tensor>> free_buffers_;  // by dtype and element count
  uint64_t run_index_ = 0;                                                 // the index of the next run
  uint64_t first_row_ = 0;
  int64_t rows_ = 0;
  std::shared_ptr<Stream::DerivedMap> carried_;  // carry_weight_derived_values
  Stream::OutputSums output_sums_;               // run_into's sums, by caller buffer
  bool defers_sums_ = false;                     // defer_summed_products
  std::unique_ptr<CudaRunTimer> cuda_timer_;     // ONNXTRAIN_CUDA_PROFILE set: a CUDA session's node times
};

}  // namespace onnxtrain
