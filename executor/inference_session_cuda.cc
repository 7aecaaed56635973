// InferenceSession::run on a CUDA device: the same node order and kernels-by-registry as the CPU path,
// with every value in device memory (kernels/cuda/cuda_runtime.h) and every kernel enqueued on the
// stream of the session's DeviceInitializerStore, whose device-resident initializers the run reads in
// place (uploaded only when missing or stale). Compiled in every build; with CUDA compiled out a CUDA
// session cannot be made.
#include <algorithm>
#include <chrono>
#include <exception>

#include "executor/inference_session.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

namespace {

// One value of a run on the device: its buffer (returned to the stream's cache when dropped) and sizes;
// an initializer borrows the store's device copy instead (`buffer` empty, `borrowed` set).
struct DeviceValue {
  cuda::DeviceBuffer buffer;
  DType dtype = DType::Undefined;
  std::vector<int64_t> sizes;
  const void* borrowed = nullptr;

  bool empty() const { return dtype == DType::Undefined; }
  const void* data() const { return borrowed ? borrowed : buffer.data(); }
  TensorView view() const { return {dtype, sizes, const_cast<void*>(data()), DeviceKind::Cuda}; }
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

// An input already in device memory: read in place on the stream's device (like an initializer, never
// written), copied onto it from another device (a peer copy where the devices allow it).
DeviceValue borrow_or_copy(const cuda::DeviceStream& stream, const DeviceTensor& input) {
  if (input.buffer.bytes() == 0 || input.buffer.device() == stream.device())
    return {.buffer = {}, .dtype = input.dtype, .sizes = input.sizes, .borrowed = input.buffer.data()};
  DeviceValue value = allocate_on(stream, input.dtype, input.sizes);
  cuda::copy_between_devices(value.buffer.data(), stream.device(), input.buffer.data(), input.buffer.device(),
                             byte_count(input.dtype, input.sizes), stream);
  return value;
}

// Downloads into a fresh host tensor; complete after stream.synchronize().
Tensor download_async(const cuda::DeviceStream& stream, const DeviceValue& value) {
  Tensor host(value.dtype, value.sizes);
  if (host.nbytes()) cuda::copy_to_host(host.raw(), value.data(), host.nbytes(), stream);
  return host;
}

// A graph output kept in device memory: the value's own buffer, or a copy of a borrowed initializer.
DeviceTensor keep(const cuda::DeviceStream& stream, DeviceValue& value) {
  DeviceTensor kept{.buffer = {}, .dtype = value.dtype, .sizes = value.sizes};
  if (!value.borrowed) {
    kept.buffer = std::move(value.buffer);
    value.borrowed = kept.buffer.data();  // a repeated output name finds the data where it went
    return kept;
  }
  const size_t bytes = byte_count(value.dtype, value.sizes);
  if (bytes) {
    kept.buffer = cuda::DeviceBuffer(stream, bytes);
    cuda::copy_on_device(kept.buffer.data(), value.borrowed, bytes, stream);
  }
  return kept;
}

}  // namespace

std::map<std::string, Tensor> InferenceSession::run_on_cuda(
    const std::map<std::string, Tensor>& inputs, const std::map<std::string, const DeviceTensor*>& device_inputs,
    const OutputCallback& on_output, const std::set<std::string>* keep_on_device,
    std::map<std::string, DeviceTensor>* device_outputs) {
  std::map<std::string, TensorDesc> descs = descs_of(inputs);
  for (const auto& [name, t] : device_inputs) descs.emplace(name, TensorDesc{t->dtype, t->sizes});
  const SymbolBindings bindings = bind_inputs(descs);
  if (!prepared_for_ || *prepared_for_ != bindings) prepare(bindings);
  DeviceInitializerStore& store = *device_initializers_;
  const cuda::DeviceStream& stream = store.stream();

  std::vector<DeviceValue> values(graph_.value_count());
  // Kernels prepared for this run only (data-dependent nodes) live until the run's synchronisation:
  // their enqueued work may read what they own (pinned constants, error flags), and freeing pinned
  // memory right after the launch would either race with that work or stall the whole device.
  std::vector<std::unique_ptr<Kernel>> per_run_kernels;
  // Leaving by an exception: wait for the work already enqueued before its buffers, kernels and host
  // tensors go (a second error, the sticky one of a failed kernel, is not the one to report).
  struct DrainOnThrow {
    const cuda::DeviceStream& stream;
    int uncaught = std::uncaught_exceptions();
    ~DrainOnThrow() {
      if (std::uncaught_exceptions() <= uncaught) return;
      try {
        stream.synchronize();
      } catch (...) {
      }
    }
  };
  std::map<std::string, Tensor> outputs;  // before `drain`: a download still in flight writes into it
  DrainOnThrow drain{stream};

  CudaRunTimer* timer = cuda_timer_.get();
  if (timer) timer->begin(stream);
  // Initializers are device-resident: the store uploads one only at its first use or when its host copy
  // changed; the run reads (never writes) the store's copy in place.
  for (ValueId id : graph_.initializers) {
    const Value& v = graph_.value(id);
    values[id.index] = {
        .buffer = {}, .dtype = v.data->dtype(), .sizes = v.data->sizes(), .borrowed = store.data(v.name, *v.data)};
  }
  for (ValueId id : graph_.inputs) {
    const std::string& name = graph_.value(id).name;
    auto on_device = device_inputs.find(name);
    values[id.index] =
        on_device == device_inputs.end() ? upload(stream, inputs.at(name)) : borrow_or_copy(stream, *on_device->second);
  }

  const bool dynamic = std::any_of(prepared_.begin(), prepared_.end(), [](const PreparedNode& p) { return !p.kernel; });
  std::optional<Graph> scratch;
  if (dynamic) scratch = bound_;

  Stream kernel_stream = stream.kernel_stream(run_index_++);
  kernel_stream.set_rows(first_row_, rows_);
  if (timer) timer->nodes_begin(stream);
  for (size_t i = 0; i < prepared_.size(); ++i) {
    const auto host_start = std::chrono::steady_clock::now();
    PreparedNode& p = prepared_[i];
    const Node& node = graph_.node(p.node);
    // A data-dependent node reads its small inputs back (a host synchronisation the shapes force).
    std::vector<Tensor> small_inputs(node.inputs.size());
    std::unique_ptr<Kernel> per_run;
    Kernel& kernel = kernel_for_run(
        p, scratch,
        [&](ValueId in) {
          const DeviceValue& v = values[in.index];
          const Tensor* small = nullptr;
          // Values the scratch graph already holds (initializers, values read back for an earlier node of this
          // run) are not read back again: shape inference uses the data it has, and each read-back waits.
          if (!scratch->value(in).data && TensorDesc{v.dtype, v.sizes}.numel() <= 64) {
            const size_t slot = std::find(node.inputs.begin(), node.inputs.end(), in) - node.inputs.begin();
            small_inputs[slot] = download_async(stream, v);
            stream.synchronize();
            small = &small_inputs[slot];
          }
          return std::pair{v.sizes, small};
        },
        per_run);
    if (per_run) per_run_kernels.push_back(std::move(per_run));  // `kernel` still refers to it

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
    if (timer) {
      timer->node_done(
          stream, node.op_type,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count());
    }
    if (scratch) {
      for (ValueId out : node.outputs)
        if (out.valid()) scratch->value(out).shape = Shape::of(values[out.index].sizes);
    }
    // Stream order makes an early release safe: a later allocation reusing the block runs after this node.
    for (ValueId in : node.inputs)
      if (in.valid() && last_use_[in.index] == i) values[in.index] = DeviceValue{};
  }

  if (device_outputs) device_outputs->clear();
  for (ValueId id : graph_.outputs) {
    const std::string& name = graph_.value(id).name;
    if (keep_on_device && keep_on_device->contains(name)) {
      if (!device_outputs->contains(name)) device_outputs->emplace(name, keep(stream, values[id.index]));
    } else {
      outputs[name] = download_async(stream, values[id.index]);
    }
  }
  if (timer) timer->end(stream);
  try {
    stream.synchronize();  // the run's one wait: asynchronous kernel faults surface here
  } catch (Error& e) {
    throw Error("a CUDA kernel of this run failed on " + device_.name() + ": " + e.message());
  }
  if (timer) timer->finish(stream);
  if (on_output)
    for (ValueId id : graph_.outputs) on_output(graph_.value(id).name, outputs.at(graph_.value(id).name));  // none kept
  return outputs;
}

}  // namespace onnxtrain
