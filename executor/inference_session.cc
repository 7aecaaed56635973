#include "executor/inference_session.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "executor/host_memory.h"
#include "graph/error.h"
#include "graph/op_schema.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

namespace {

Error node_error(const Node& node, const std::string& message) {
  return Error(message).at_node(node.name, node.op_type, node.domain, node.opset);
}

std::vector<int64_t> static_sizes_of(const Value& value, const Node& node) {
  if (!value.shape.is_static()) {
    throw node_error(node, "value '" + value.name + "' has shape " + value.shape.to_string() +
                               ", not static once the batch is bound; running needs static shapes "
                               "(re-export with fixed sizes for the other dynamic dims)");
  }
  return value.shape.static_sizes();
}

KernelSpec spec_for(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  KernelSpec spec{.op_type = node.op_type,
                  .domain = node.domain,
                  .opset = node.opset,
                  .attributes = node.attributes,
                  .node_name = node.name};
  for (ValueId in : node.inputs) {
    if (!in.valid()) {
      spec.inputs.emplace_back();
      continue;
    }
    const Value& v = graph.value(in);
    spec.inputs.push_back({v.dtype, v.data ? v.data->sizes() : static_sizes_of(v, node)});
  }
  for (ValueId out : node.outputs) {
    spec.outputs.push_back(out.valid() ? TensorDesc{graph.value(out).dtype, static_sizes_of(graph.value(out), node)}
                                       : TensorDesc{});
  }
  return spec;
}

bool outputs_static(const Graph& graph, NodeId id) {
  for (ValueId out : graph.node(id).outputs)
    if (out.valid() && !graph.value(out).shape.is_static()) return false;
  return true;
}

// Adds a node's output (a fresh buffer) into the caller's buffer that the output goes into (run_into).
void add_into(const Tensor& value, const Tensor& target) {
  const float* from = value.data<float>().data();
  float* to = const_cast<float*>(target.data<float>().data());
  const int64_t n = value.numel();
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) to[i] += from[i];
}

}  // namespace

InferenceSession::InferenceSession(const Graph& graph, std::string implementation, Device device,
                                   std::shared_ptr<DeviceInitializerStore> initializers)
    : graph_(graph),
      device_(device),
      implementation_(std::move(implementation)),
      last_use_(graph.value_count(), 0),
      consumed_(graph.value_count(), false) {
  const auto& order = graph_.order();
  for (size_t i = 0; i < order.size(); ++i) {
    for (ValueId in : graph_.node(order[i]).inputs) {
      if (!in.valid()) continue;
      last_use_[in.index] = i;
      consumed_[in.index] = true;
    }
  }
  for (ValueId out : graph_.outputs) last_use_[out.index] = SIZE_MAX;  // never released
  retain_freed_host_memory();  // the session's outputs are fresh buffers on every run
  if (device_.kind == DeviceKind::Cuda) {
    cuda::require_device(device_.index, "a session on " + device_.name());
    // Plan time: a node the device cannot run is an error now, not a CPU fallback in the middle of a run.
    if (auto missing = missing_kernels(); !missing.empty()) {
      std::string list;
      for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
      throw Error("no CUDA kernel for " + list +
                  " (onnxtrain never falls back to the CPU silently; train with "
                  "--device cpu, or add the kernels under kernels/cuda/)");
    }
    if (initializers && initializers->device() != device_.index) {
      throw Error("a session on " + device_.name() + " was given the device initializers of " +
                  Device::cuda(initializers->device()).name());
    }
    device_initializers_ =
        initializers ? std::move(initializers) : std::make_shared<DeviceInitializerStore>(device_.index);
    if (cuda_profile_requested()) {
      cuda_timer_ = std::make_unique<CudaRunTimer>(
          device_.index, "session of " + std::to_string(order.size()) + " nodes on " + device_.name());
    }
  }
}

void InferenceSession::initializers_changed() {
  if (device_initializers_) device_initializers_->mark_host_changed();
}

std::map<std::string, Tensor> InferenceSession::run(const std::map<std::string, Tensor>& inputs,
                                                    const std::set<std::string>& keep_on_device,
                                                    std::map<std::string, DeviceTensor>& device_outputs) {
  return run(inputs, {}, keep_on_device, device_outputs);
}

std::map<std::string, Tensor> InferenceSession::run(const std::map<std::string, Tensor>& inputs,
                                                    const std::map<std::string, const DeviceTensor*>& device_inputs,
                                                    const std::set<std::string>& keep_on_device,
                                                    std::map<std::string, DeviceTensor>& device_outputs) {
  if (device_.kind != DeviceKind::Cuda) {
    throw Error("device-resident inputs and outputs need a session on a CUDA device; this one runs on " +
                device_.name());
  }
  for (const std::string& name : keep_on_device) {
    const bool is_output = std::any_of(graph_.outputs.begin(), graph_.outputs.end(),
                                       [&](ValueId id) { return graph_.value(id).name == name; });
    if (!is_output) throw Error("'" + name + "' is not a graph output, so it cannot be kept on the device");
  }
  for (const auto& [name, value] : device_inputs) {
    if (inputs.contains(name)) throw Error("input '" + name + "' was given twice: on the host and on the device");
  }
  return run_on_cuda(inputs, device_inputs, {}, &keep_on_device, &device_outputs);
}

InferenceSession::~InferenceSession() = default;

std::map<std::string, TensorDesc> InferenceSession::descs_of(const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, TensorDesc> descs;
  for (const auto& [name, t] : inputs) descs.emplace(name, TensorDesc{t.dtype(), t.sizes()});
  return descs;
}

SymbolBindings InferenceSession::bind_inputs(const std::map<std::string, TensorDesc>& inputs) const {
  SymbolBindings bindings;
  for (ValueId id : graph_.inputs) {
    const Value& v = graph_.value(id);
    auto it = inputs.find(v.name);
    if (it == inputs.end()) throw Error("input '" + v.name + "' " + v.shape.to_string() + " was not given");
    const TensorDesc& t = it->second;
    auto mismatch = [&](const std::string& what) {
      return Error("input '" + v.name + "': " + what + "; the model expects " + std::string(dtype_name(v.dtype)) + " " +
                   v.shape.to_string() + ", got " + std::string(dtype_name(t.dtype)) + " " +
                   Shape::of(t.sizes).to_string());
    };
    if (t.dtype != v.dtype) throw mismatch("wrong element type");
    if (!v.shape.rank_known) continue;
    if (static_cast<int64_t>(t.sizes.size()) != v.shape.rank()) throw mismatch("wrong rank");
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      const Dim& dim = v.shape.dims[d];
      const int64_t size = t.sizes[d];
      if (dim.is_static() && dim.value() != size) throw mismatch("wrong size in dimension " + std::to_string(d));
      if (dim.is_symbolic()) {
        if (size % dim.factor() != 0)
          throw mismatch("dimension " + std::to_string(d) + " is not a multiple of " + std::to_string(dim.factor()));
        auto [bound, inserted] = bindings.emplace(dim.symbol_name(), size / dim.factor());
        if (!inserted && bound->second != size / dim.factor()) {
          throw mismatch("'" + dim.symbol_name() + "' is " + std::to_string(bound->second) + " in another input");
        }
      }
    }
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = std::any_of(graph_.inputs.begin(), graph_.inputs.end(),
                             [&](ValueId id) { return graph_.value(id).name == name; });
    if (!known) throw Error("the model has no input named '" + name + "'");
  }
  return bindings;
}

std::vector<std::string> InferenceSession::missing_kernels() const {
  std::vector<std::string> missing;
  for (NodeId id : graph_.order()) {
    const Node& node = graph_.node(id);
    KernelSpec spec{.op_type = node.op_type, .domain = node.domain};
    for (ValueId in : node.inputs)
      spec.inputs.push_back(in.valid() ? TensorDesc{graph_.value(in).dtype, {}} : TensorDesc{});
    for (ValueId out : node.outputs)
      spec.outputs.push_back(out.valid() ? TensorDesc{graph_.value(out).dtype, {}} : TensorDesc{});
    const DType dtype = kernel_dtype(spec);
    if (!KernelRegistry::builtin().find(node.domain, node.op_type, device_.kind, dtype, implementation_)) {
      std::string label =
          (node.domain.empty() ? "" : node.domain + ".") + node.op_type + " (" + std::string(dtype_name(dtype)) + ")";
      if (std::find(missing.begin(), missing.end(), label) == missing.end()) missing.push_back(label);
    }
  }
  return missing;
}

std::unique_ptr<Kernel> InferenceSession::prepare_node(const Graph& graph, NodeId id,
                                                       std::vector<std::vector<int64_t>>& output_sizes) const {
  const Node& node = graph.node(id);
  KernelSpec spec = spec_for(graph, id);
  const DType dtype = kernel_dtype(spec);
  const KernelEntry* entry =
      KernelRegistry::builtin().find(node.domain, node.op_type, device_.kind, dtype, implementation_);
  if (!entry) {
    const std::string where = device_.kind == DeviceKind::Cpu ? "CPU" : "CUDA";
    throw node_error(node, "no " + where + " kernel" + (implementation_.empty() ? "" : " (" + implementation_ + ")") +
                               " for this op with " + std::string(dtype_name(dtype)) + " inputs yet");
  }
  output_sizes.clear();
  for (const TensorDesc& out : spec.outputs) output_sizes.push_back(out.sizes);
  try {
    return entry->prepare(spec);
  } catch (Error& e) {
    e.at_node(node.name, node.op_type, node.domain, node.opset);
    throw;
  }
}

void InferenceSession::prepare(const SymbolBindings& bindings) {
  bound_ = graph_;
  for (size_t i = 0; i < bound_.value_count(); ++i) {
    Value& v = bound_.value(ValueId{static_cast<uint32_t>(i)});
    v.shape = v.shape.bind(bindings);
    if (v.known)
      for (Dim& d : *v.known) d = d.bind(bindings);
  }
  kernels_by_threads_.clear();
  prepare_kernels();
  prepared_for_ = bindings;
}

void InferenceSession::prepare_kernels() {
  prepared_.clear();
  for (NodeId id : bound_.order()) {
    PreparedNode p{id, nullptr, {}, views_input_of(id)};
    // Nodes whose sizes depend on run-time values are prepared on every run instead (no kernel here).
    if (outputs_static(bound_, id)) p.kernel = prepare_node(bound_, id, p.output_sizes);
    prepared_.push_back(std::move(p));
  }
  prepared_threads_ = omp_get_max_threads();
}

// oneDNN fixes a primitive's thread count when it is created (a convolution splits its work for that many
// and runs that many whatever omp_set_num_threads says later), so a run at another thread count (the
// trainer's, lowered while the machine is busy) gets kernels made at that count, kept for a return.
void InferenceSession::use_kernels_for_threads(int threads) {
  if (threads == prepared_threads_) return;
  kernels_by_threads_[prepared_threads_] = std::move(prepared_);
  auto kept = kernels_by_threads_.find(threads);
  if (kept == kernels_by_threads_.end()) {
    prepare_kernels();
    return;
  }
  prepared_ = std::move(kept->second);
  kernels_by_threads_.erase(kept);
  prepared_threads_ = threads;
}

bool InferenceSession::views_input_of(NodeId id) const {
  const Node& node = graph_.node(id);
  if (!is_reshape_of_input(node)) return false;
  const ValueId in = node.inputs[0], out = node.outputs[0];
  return !graph_.value(in).data && !is_caller_input(in) && last_use_[out.index] != SIZE_MAX;
}

// Shape inference again for one node, now that its inputs exist: their real sizes, and the values of
// small inputs (shapes, bounds, pads) as constants.
void InferenceSession::infer_with_values(Graph& graph, NodeId id, const InputFacts& input) const {
  const Node& node = graph.node(id);
  for (ValueId in : node.inputs) {
    if (!in.valid()) continue;
    Value& v = graph.value(in);
    const auto [sizes, small] = input(in);
    v.shape = Shape::of(sizes);
    if (!v.data && small) {  // shapes, bounds, pads, Range's limits: small tensors of any type
      v.data = *small;
      v.known.reset();  // the import-time values may hold symbols; the data is exact
      v.role = ValueRole::Constant;
    }
  }
  const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
  if (!schema) {
    throw node_error(node, "onnxtrain has no implementation of " + node.op_type +
                               " yet (no schema to size its outputs from its inputs)");
  }
  infer_node(graph, id, *schema);
  if (!outputs_static(graph, id)) {
    throw node_error(node, "output sizes stay unknown even with the input values known");
  }
}

// Buffers of released values are kept for the next output of the same dtype and size (this run or the
// next), so a session that runs again allocates nothing: fresh large allocations cost a page fault per
// 4 KiB. Kernels write every element of their outputs, so neither a reused buffer nor a fresh one is
// cleared (zeroing the first step's 2 GB of ResNet-50 buffers on one thread cost 0.4 s of start-up).
Tensor InferenceSession::allocate(DType dtype, const std::vector<int64_t>& sizes) {
  const int64_t numel = TensorDesc{dtype, sizes}.numel();
  auto it = free_buffers_.find({dtype, numel});
  if (it == free_buffers_.end() || it->second.empty()) {
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    return Tensor::wrap(dtype, sizes,
                        std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>()));
  }
  Tensor t = it->second.back().reshaped(sizes);
  it->second.pop_back();
  return t;
}

bool InferenceSession::is_caller_input(ValueId id) const {
  return std::find(graph_.inputs.begin(), graph_.inputs.end(), id) != graph_.inputs.end();
}

// The inputs whose last reader was node `index` of the order.
void InferenceSession::release_inputs_after(const Node& node, size_t index, std::vector<Tensor>& values,
                                            Stream& stream) {
  for (ValueId in : node.inputs) {
    if (in.valid() && last_use_[in.index] == index && !graph_.value(in).data) {
      stream.forget_derived(values[in.index].raw());  // its buffer may hold another value next
      release(values[in.index], in);
    }
  }
}

// A buffer another value still shares (a view of it, views_input_of) is only dropped here; the pool gets
// it when the last of them is released.
void InferenceSession::release(Tensor& tensor, ValueId id) {
  if (!is_caller_input(id) && !tensor.empty() && tensor.numel() > 0 && tensor.sole_owner()) {
    free_buffers_[{tensor.dtype(), tensor.numel()}].push_back(std::move(tensor));
  }
  tensor = Tensor();
}

void InferenceSession::recycle(Tensor&& tensor) {
  if (device_.kind == DeviceKind::Cpu && !tensor.empty() && tensor.numel() > 0 && tensor.sole_owner())
    free_buffers_[{tensor.dtype(), tensor.numel()}].push_back(std::move(tensor));
  tensor = Tensor();
}

std::map<std::string, Tensor> InferenceSession::run(const std::map<std::string, Tensor>& inputs) {
  return run(inputs, {});
}

// The prepared kernel of a node, or for a data-dependent node one prepared now from its inputs' facts.
Kernel& InferenceSession::kernel_for_run(PreparedNode& p, std::optional<Graph>& scratch, const InputFacts& input,
                                         std::unique_ptr<Kernel>& per_run) const {
  if (p.kernel) return *p.kernel;
  infer_with_values(*scratch, p.node, input);
  per_run = prepare_node(*scratch, p.node, p.output_sizes);
  return *per_run;
}

std::map<std::string, Tensor> InferenceSession::run(const std::map<std::string, Tensor>& inputs,
                                                    const OutputCallback& on_output) {
  if (device_.kind == DeviceKind::Cuda) return run_on_cuda(inputs, {}, on_output, nullptr, nullptr);
  return run_on_cpu(inputs, on_output, {}, false);
}

std::map<std::string, Tensor> InferenceSession::run_into(const std::map<std::string, Tensor>& inputs,
                                                         const std::map<std::string, Tensor>& into, bool add) {
  if (device_.kind != DeviceKind::Cpu) {
    throw Error("outputs written into the caller's buffers need a CPU session; this one runs on " + device_.name());
  }
  return run_on_cpu(inputs, {}, into, add);
}

const Stream::OutputSum* InferenceSession::kept_sum(const void* buffer) const {
  auto it = output_sums_.find(buffer);
  return it != output_sums_.end() && it->second.kept ? &it->second : nullptr;
}

void InferenceSession::finish_sums() {
  for (auto& [buffer, sum] : output_sums_) {
    float* out = static_cast<float*>(const_cast<void*>(buffer));
    if (sum.deferred) {
      sum.deferred->finish(out, !sum.overwrite);
      sum.deferred.reset();
    } else if (sum.kept) {
      expand_taps(sum.layout, sum.partial.data(), out, !sum.overwrite);
      sum.kept = false;
    }
    sum.overwrite = false;  // the buffer holds the sum: a run that continues it adds
  }
}

std::vector<const Tensor*> InferenceSession::targets_of(const std::map<std::string, Tensor>& into) const {
  std::vector<const Tensor*> targets(graph_.value_count(), nullptr);
  for (const auto& [name, buffer] : into) {
    auto it = std::find_if(graph_.outputs.begin(), graph_.outputs.end(),
                           [&](ValueId id) { return graph_.value(id).name == name; });
    if (it == graph_.outputs.end()) throw Error("'" + name + "' is not a graph output, so no buffer can take it");
    const Value& v = graph_.value(*it);
    if (v.dtype != DType::Float32 || buffer.dtype() != DType::Float32)
      throw Error("output '" + name + "' goes into a buffer only as float32; it is " +
                  std::string(dtype_name(v.dtype)));
    targets[it->index] = &buffer;
  }
  return targets;
}

std::map<std::string, Tensor> InferenceSession::run_on_cpu(const std::map<std::string, Tensor>& inputs,
                                                           const OutputCallback& on_output,
                                                           const std::map<std::string, Tensor>& into, bool add) {
  const std::vector<const Tensor*> target = targets_of(into);
  const SymbolBindings bindings = bind_inputs(descs_of(inputs));
  if (!prepared_for_ || *prepared_for_ != bindings) prepare(bindings);
  use_kernels_for_threads(omp_get_max_threads());

  std::vector<Tensor> values(graph_.value_count());
  for (ValueId id : graph_.initializers) values[id.index] = *graph_.value(id).data;
  for (ValueId id : graph_.inputs) values[id.index] = inputs.at(graph_.value(id).name);

  // Data-dependent nodes are inferred on a copy, so that every run starts from the bound graph.
  const bool dynamic = std::any_of(prepared_.begin(), prepared_.end(), [](const PreparedNode& p) { return !p.kernel; });
  std::optional<Graph> scratch;
  if (dynamic) scratch = bound_;

  Stream stream(DeviceKind::Cpu, run_index_++);
  stream.set_rows(first_row_, rows_);
  stream.enable_derived_values();  // the weights and every value stay as they are while they are alive
  if (!into.empty()) stream.sum_outputs(&output_sums_, defers_sums_);
  if (carried_) stream.adopt_derived(*carried_);
  for (size_t i = 0; i < prepared_.size(); ++i) {
    PreparedNode& p = prepared_[i];
    const Node& node = graph_.node(p.node);
    std::unique_ptr<Kernel> per_run;
    Kernel* kernel = &kernel_for_run(
        p, scratch,
        [&](ValueId in) {
          const Tensor& t = values[in.index];
          return std::pair{t.sizes(), t.numel() <= 64 ? &t : nullptr};
        },
        per_run);
    const ValueId viewed = node.inputs.empty() ? ValueId{} : node.inputs[0];
    if (p.views_input && !target[node.outputs[0].index] &&
        values[viewed.index].numel() == TensorDesc{values[viewed.index].dtype(), p.output_sizes[0]}.numel()) {
      values[node.outputs[0].index] = values[viewed.index].reshaped(p.output_sizes[0]);
      if (scratch) scratch->value(node.outputs[0]).shape = Shape::of(p.output_sizes[0]);
      release_inputs_after(node, i, values, stream);
      continue;
    }
    std::vector<TensorView> in_views, out_views;
    for (ValueId in : node.inputs) in_views.push_back(in.valid() ? TensorView::of(values[in.index]) : TensorView{});
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      ValueId out = node.outputs[o];
      if (!out.valid()) {
        out_views.emplace_back();
        continue;
      }
      const Tensor* buffer = target[out.index];
      if (buffer && buffer->numel() != TensorDesc{DType::Float32, p.output_sizes[o]}.numel()) {
        throw node_error(node, "output '" + graph_.value(out).name + "' " + Shape::of(p.output_sizes[o]).to_string() +
                                   " goes into a buffer of " + std::to_string(buffer->numel()) + " elements");
      }
      // Straight into the caller's buffer when it is written, or when the kernel sums it and no later node
      // reads the output (it would see the sum, or nothing yet); else into a fresh buffer, added after the
      // node.
      const bool summed = buffer && kernel->sums_output(o) && !consumed_[out.index];
      if (buffer && (!add || summed)) {
        values[out.index] = buffer->reshaped(p.output_sizes[o]);
        if (summed) Stream::start_or_continue_sum(output_sums_, buffer->raw(), add);
      } else {
        values[out.index] = allocate(graph_.value(out).dtype, p.output_sizes[o]);
      }
      out_views.push_back(TensorView::of(values[out.index]));
    }
    try {
      kernel->run(stream, in_views, out_views);
    } catch (Error& e) {
      e.at_node(node.name, node.op_type, node.domain, node.opset);
      throw;
    }
    for (ValueId out : node.outputs) {
      if (out.valid() && target[out.index] && values[out.index].raw() != target[out.index]->raw())
        add_into(values[out.index], *target[out.index]);
    }
    if (on_output) {
      for (ValueId out : node.outputs)
        if (out.valid() && last_use_[out.index] == SIZE_MAX && !values[out.index].empty())
          on_output(graph_.value(out).name, values[out.index]);
    }
    if (scratch) {  // later data-dependent nodes see this node's real output sizes
      for (ValueId out : node.outputs)
        if (out.valid()) scratch->value(out).shape = Shape::of(values[out.index].sizes());
    }
    release_inputs_after(node, i, values, stream);
  }
  if (carried_)
    for (ValueId id : graph_.initializers) stream.copy_derived_of(values[id.index].raw(), *carried_);

  std::map<std::string, Tensor> outputs;
  for (ValueId id : graph_.outputs) {
    const Tensor* buffer = target[id.index];
    if (!buffer) {
      outputs[graph_.value(id).name] = values[id.index];
    } else if (!graph_.value(id).producer.valid()) {  // a graph input or initializer that is an output too
      if (values[id.index].numel() != buffer->numel() || values[id.index].dtype() != DType::Float32)
        throw Error("output '" + graph_.value(id).name + "' does not fit the buffer it goes into");
      if (add) {
        add_into(values[id.index], *buffer);
      } else {
        std::memcpy(const_cast<std::byte*>(buffer->raw()), values[id.index].raw(), buffer->nbytes());
      }
    } else if (values[id.index].raw() != buffer->raw()) {
      release(values[id.index], id);  // the fresh buffer added into the caller's
    }
  }
  // What no node consumed (unused optional outputs) goes back to the pool too; graph outputs are the caller's.
  for (size_t v = 0; v < values.size(); ++v) {
    const ValueId id{static_cast<uint32_t>(v)};
    if (!values[v].empty() && !graph_.value(id).data && last_use_[v] != SIZE_MAX) release(values[v], id);
  }
  return outputs;
}

}  // namespace onnxtrain
