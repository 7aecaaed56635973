// InferenceSession::run on a CUDA device: the same node order and kernels-by-registry as the CPU path,
// with every value in device memory (kernels/cuda/cuda_runtime.h) and every kernel enqueued on the
// session's stream. Compiled in every build; with CUDA compiled out a CUDA session cannot be made.
#include <algorithm>

#include "executor/inference_session.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

namespace {

// One value of a run on the device: its buffer (returned to the stream's cache when dropped) and sizes.
struct DeviceValue {
  cuda::DeviceBuffer buffer;
  DType dtype = DType::Undefined;
  std::vector<int64_t> sizes;

  bool empty() const { return dtype == DType::Undefined; }
  TensorView view() const { return {dtype, sizes, buffer.data(), DeviceKind::Cuda}; }
};

size_t byte_count(DType dtype, const std::vector<int64_t>& sizes) {
  return static_cast<size_t>(TensorDesc{dtype, sizes}.numel()) * dtype_size(dtype);
}

DeviceValue allocate_on(const cuda::DeviceStream& stream, DType dtype, std::vector<int64_t> sizes) {
  const size_t bytes = byte_count(dtype, sizes);
  return {bytes ? cuda::DeviceBuffer(stream, bytes) : cuda::DeviceBuffer(), dtype, std::move(sizes)};
}

DeviceValue upload(const cuda::DeviceStream& stream, const Tensor& host) {
  DeviceValue value = allocate_on(stream, host.dtype(), host.sizes());
  if (host.nbytes()) cuda::copy_to_device(value.buffer.data(), host.raw(), host.nbytes(), stream);
  return value;
}

// Downloads into a fresh host tensor; complete after stream.synchronize().
Tensor download_async(const cuda::DeviceStream& stream, const DeviceValue& value) {
  Tensor host(value.dtype, value.sizes);
  if (host.nbytes()) cuda::copy_to_host(host.raw(), value.buffer.data(), host.nbytes(), stream);
  return host;
}

}  // namespace

std::map<std::string, Tensor> InferenceSession::run_on_cuda(const std::map<std::string, Tensor>& inputs,
                                                            const OutputCallback& on_output) {
  const SymbolBindings bindings = bind_inputs(inputs);
  if (!prepared_for_ || *prepared_for_ != bindings) prepare(bindings);
  const cuda::DeviceStream& stream = *cuda_stream_;

  // Initializers are uploaded on every run: the trainer's optimizer updates their host copies between runs.
  std::vector<DeviceValue> values(graph_.value_count());
  for (ValueId id : graph_.initializers) values[id.index] = upload(stream, *graph_.value(id).data);
  for (ValueId id : graph_.inputs) values[id.index] = upload(stream, inputs.at(graph_.value(id).name));

  const bool dynamic = std::any_of(prepared_.begin(), prepared_.end(), [](const PreparedNode& p) { return !p.kernel; });
  std::optional<Graph> scratch;
  if (dynamic) scratch = bound_;

  Stream kernel_stream = stream.kernel_stream(run_index_++);
  for (size_t i = 0; i < prepared_.size(); ++i) {
    PreparedNode& p = prepared_[i];
    const Node& node = graph_.node(p.node);
    // A data-dependent node reads its small inputs back (a host synchronisation the shapes force).
    std::vector<Tensor> small_inputs(node.inputs.size());
    std::unique_ptr<Kernel> per_run;
    Kernel& kernel = kernel_for_run(p, scratch, [&](ValueId in) {
      const DeviceValue& v = values[in.index];
      const Tensor* small = nullptr;
      if (TensorDesc{v.dtype, v.sizes}.numel() <= 64) {
        const size_t slot = std::find(node.inputs.begin(), node.inputs.end(), in) - node.inputs.begin();
        small_inputs[slot] = download_async(stream, v);
        stream.synchronize();
        small = &small_inputs[slot];
      }
      return std::pair{v.sizes, small};
    }, per_run);

    std::vector<TensorView> in_views, out_views;
    for (ValueId in : node.inputs) in_views.push_back(in.valid() ? values[in.index].view() : TensorView{});
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId out = node.outputs[o];
      if (!out.valid()) {
        out_views.emplace_back();
        continue;
      }
      values[out.index] = allocate_on(stream, graph_.value(out).dtype, p.output_sizes[o]);
      out_views.push_back(values[out.index].view());
    }
    try {
      kernel.run(kernel_stream, in_views, out_views);
    } catch (Error& e) {
      e.at_node(node.name, node.op_type, node.domain, node.opset);
      throw;
    }
    if (scratch) {
      for (ValueId out : node.outputs)
        if (out.valid()) scratch->value(out).shape = Shape::of(values[out.index].sizes);
    }
    // Stream order makes an early release safe: a later allocation reusing the block runs after this node.
    for (ValueId in : node.inputs)
      if (in.valid() && last_use_[in.index] == i) values[in.index] = DeviceValue{};
  }

  std::map<std::string, Tensor> outputs;
  for (ValueId id : graph_.outputs) outputs[graph_.value(id).name] = download_async(stream, values[id.index]);
  try {
    stream.synchronize();  // the run's one wait: asynchronous kernel faults surface here
  } catch (Error& e) {
    throw Error("a CUDA kernel of this run failed on " + device_.name() + ": " + e.message());
  }
  if (on_output)
    for (ValueId id : graph_.outputs) on_output(graph_.value(id).name, outputs.at(graph_.value(id).name));
  return outputs;
}

}  // namespace onnxtrain
