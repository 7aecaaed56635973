#include "partitioner/node_profiler.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/op_schema.h"
#include "kernels/kernel.h"
#include "partitioner/cost_model.h"

namespace onnxtrain {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kCacheFormat = "onnxtrain-node-profile";
constexpr int kCacheVersion = 4;  // 2: derived values kept within a run, micro-batch mode; 3: deferred sums; 4: views

Error node_error(const Node& node, const std::string& message) {
  return Error(message).at_node(node.name, node.op_type, node.domain, node.opset);
}

bool sizes_static(const Graph& g, const Node& node) {
  for (ValueId v : node.inputs)
    if (v.valid() && !g.value(v).data && !g.value(v).shape.is_static()) return false;
  for (ValueId v : node.outputs)
    if (v.valid() && !g.value(v).shape.is_static()) return false;
  return true;
}

std::unique_ptr<Kernel> prepare_kernel(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
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
    const Value& v = g.value(in);
    spec.inputs.push_back({v.dtype, v.data ? v.data->sizes() : v.shape.static_sizes()});
  }
  for (ValueId out : node.outputs)
    spec.outputs.push_back(out.valid() ? TensorDesc{g.value(out).dtype, g.value(out).shape.static_sizes()}
                                       : TensorDesc{});
  const DType dtype = kernel_dtype(spec);
  const KernelEntry* entry = KernelRegistry::builtin().find(node.domain, node.op_type, DeviceKind::Cpu, dtype);
  if (!entry)
    throw node_error(node, "no CPU kernel for this op with " + std::string(dtype_name(dtype)) + " inputs to profile");
  try {
    return entry->prepare(spec);
  } catch (Error& e) {
    e.at_node(node.name, node.op_type, node.domain, node.opset);
    throw;
  }
}

// As InferenceSession does for data-dependent sizes: infer the node again with its inputs' real sizes
// and small inputs (shapes, bounds) as constants.
void infer_with_values(Graph& g, NodeId id, const std::vector<Tensor>& values) {
  const Node& node = g.node(id);
  for (ValueId in : node.inputs) {
    if (!in.valid()) continue;
    Value& v = g.value(in);
    const Tensor& t = values[in.index];
    v.shape = Shape::of(t.sizes());
    if (!v.data && t.numel() <= 64) {
      v.data = t;
      v.known.reset();
      v.role = ValueRole::Constant;
    }
  }
  const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
  if (!schema) {
    throw node_error(node, "onnxtrain has no implementation of " + node.op_type +
                               " yet (no schema to size its outputs from its inputs)");
  }
  infer_node(g, id, *schema);
  for (ValueId out : node.outputs)
    if (out.valid() && !g.value(out).shape.is_static())
      throw node_error(node, "output sizes stay unknown even with the input values known");
}

Graph bound_graph(const TrainingGraph& training, int64_t batch) {
  Graph g = training.graph;
  SymbolBindings bindings;
  for (const std::string& s : g.info.batch_symbols) bindings[s] = batch;
  for (size_t i = 0; i < g.value_count(); ++i) {
    Value& v = g.value(ValueId{static_cast<uint32_t>(i)});
    v.shape = v.shape.bind(bindings);
    if (v.known)
      for (Dim& d : *v.known) d = d.bind(bindings);
  }
  return g;
}

// FNV-1a over the training graph's nodes, ops and bound output shapes: a different loss, batch or model
// gives a different fingerprint even when the file's size and time match.
std::string fingerprint(const Graph& bound) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  for (NodeId id : bound.order()) {
    const Node& node = bound.node(id);
    mix(node.domain);
    mix(node.op_type);
    mix(node.name);
    for (ValueId out : node.outputs) mix(out.valid() ? bound.value(out).shape.to_string() : "-");
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

json cache_key(const std::string& model_path, int64_t batch, int threads, const std::string& graph,
               int micro_batches_summed) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(model_path, ec);
  const auto mtime = std::filesystem::last_write_time(model_path, ec);
  json key = {{"model_size", ec ? 0 : static_cast<int64_t>(size)},
              {"model_mtime", ec ? 0 : static_cast<int64_t>(mtime.time_since_epoch().count())},
              {"batch", batch},
              {"threads", threads},
              {"graph", graph}};
  if (micro_batches_summed > 1) key["micro_batches_summed"] = micro_batches_summed;  // older caches stay valid
  return key;
}

std::optional<NodeTimes> read_cache(const std::string& path, const json& key, const std::vector<std::string>& names,
                                    std::string& note) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    json doc = json::parse(in);
    if (doc.value("format", "") != kCacheFormat || doc.value("version", 0) != kCacheVersion) {
      note = path + " is not a node profile of this version; measuring again";
      return std::nullopt;
    }
    if (doc.at("key") != key) {
      note =
          path + " is for another model file, batch, thread count, training graph or micro-batch mode; measuring again";
      return std::nullopt;
    }
    const json& nodes = doc.at("nodes");
    if (!nodes.is_array() || nodes.size() != names.size()) {
      note = path + " has another node count; measuring again";
      return std::nullopt;
    }
    NodeTimes t;
    for (size_t i = 0; i < names.size(); ++i) {
      if (nodes[i].at("name").get<std::string>() != names[i]) {
        note = path + " names other nodes; measuring again";
        return std::nullopt;
      }
      t.forward_seconds.push_back(nodes[i].at("forward_seconds").get<double>());
      t.backward_seconds.push_back(nodes[i].at("backward_seconds").get<double>());
      t.sum_end_seconds.push_back(nodes[i].value("sum_end_seconds", 0.0));
    }
    t.threads = key.at("threads").get<int>();
    t.repetitions = doc.value("repetitions", 0);
    t.from_cache = true;
    t.cache_path = path;
    return t;
  } catch (const json::exception& e) {
    note = path + " is not readable (" + e.what() + "); measuring again";
    return std::nullopt;
  }
}

void write_cache(const std::string& path, const json& key, const std::vector<std::string>& names,
                 const std::vector<std::string>& ops, NodeTimes& times) {
  json nodes = json::array();
  for (size_t i = 0; i < names.size(); ++i) {
    nodes.push_back({{"name", names[i]},
                     {"op", ops[i]},
                     {"forward_seconds", times.forward_seconds[i]},
                     {"backward_seconds", times.backward_seconds[i]},
                     {"sum_end_seconds", times.sum_end_seconds[i]}});
  }
  json doc = {{"format", kCacheFormat},
              {"version", kCacheVersion},
              {"key", key},
              {"repetitions", times.repetitions},
              {"nodes", nodes}};
  // Written beside the target and renamed over it, so a reader never sees half a file; a failed write
  // (full disk) leaves the old cache and a note, and the run goes on with the times it measured.
  try {
    write_file_atomically(path, doc.dump(1) + "\n");
  } catch (const Error& e) {
    times.cache_note = "cannot write the profile cache: " + std::string(e.what());
    return;
  }
  times.cache_path = path;
}

}  // namespace

NodeTimes measure_node_times(const TrainingGraph& training, int64_t batch, const NodeProfileOptions& options) {
  if (batch <= 0) throw Error("the micro-batch size must be positive, got " + std::to_string(batch));
  Graph g = bound_graph(training, batch);
  const std::vector<NodeId>& order = g.order();

  std::vector<Tensor> values(g.value_count());
  for (ValueId id : g.initializers) values[id.index] = *g.value(id).data;
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss;
  for (ValueId id : g.inputs) {
    const Value& v = g.value(id);
    if (!v.shape.is_static()) {
      throw Error("input '" + v.name + "' has shape " + v.shape.to_string() + " with the batch bound to " +
                  std::to_string(batch) + "; profiling needs static input sizes");
    }
    Tensor t(v.dtype, v.shape.static_sizes());  // zeros: integers and booleans stay 0
    if (v.dtype == DType::Float32) {
      for (float& x : t.data<float>()) x = gauss(rng);
    } else if (v.dtype == DType::Float64) {
      for (double& x : t.data<double>()) x = gauss(rng);
    }
    values[id.index] = std::move(t);
  }

  std::vector<std::unique_ptr<Kernel>> kernels(order.size());  // null: prepared on every run
  for (size_t i = 0; i < order.size(); ++i)
    if (sizes_static(g, g.node(order[i]))) kernels[i] = prepare_kernel(g, order[i]);
  const bool dynamic = std::any_of(kernels.begin(), kernels.end(), [](const auto& k) { return !k; });

  // Micro-batch mode: the parameters' gradients go into buffers of their own, summed over a cycle's runs.
  const int cycle = std::max(1, options.micro_batches_summed);
  std::vector<bool> consumed(g.value_count(), false);
  for (NodeId id : order)
    for (ValueId v : g.node(id).inputs)
      if (v.valid()) consumed[v.index] = true;
  std::map<uint32_t, Tensor> gradient_sums;  // by value index
  if (cycle > 1) {
    for (const TrainingGraph::Gradient& grad : training.gradients) {
      const Value& gv = g.value(grad.gradient);
      if (g.value(grad.value).data && gv.dtype == DType::Float32 && gv.shape.is_static())
        gradient_sums.emplace(grad.gradient.index, Tensor(DType::Float32, gv.shape.static_sizes()));
    }
  }
  Stream::OutputSums output_sums;
  Stream::DerivedMap carried;

  // Values are freed after their last use into a pool by dtype and element count, as InferenceSession
  // does, so memory stays near a training step's and the timed runs reuse warm buffers.
  std::vector<size_t> last_use(g.value_count(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    for (ValueId v : g.node(order[i]).inputs)
      if (v.valid()) last_use[v.index] = i;
  for (ValueId v : g.outputs) last_use[v.index] = SIZE_MAX;
  for (ValueId v : g.inputs) last_use[v.index] = SIZE_MAX;
  std::map<std::pair<DType, int64_t>, std::vector<Tensor>> pool;
  auto allocate = [&](DType dtype, const std::vector<int64_t>& sizes) {
    auto it = pool.find({dtype, TensorDesc{dtype, sizes}.numel()});
    if (it == pool.end() || it->second.empty()) return Tensor(dtype, sizes);
    Tensor t = it->second.back().reshaped(sizes);
    it->second.pop_back();
    return t;
  };
  auto release = [&](ValueId v) {
    if (g.value(v).data) return;  // initializers stay for the next run
    Tensor& t = values[v.index];
    if (auto sum = gradient_sums.find(v.index); sum != gradient_sums.end() && t.raw() == sum->second.raw()) {
      t = Tensor();  // a gradient sum stays for the cycle's next run
      return;
    }
    // A buffer a view still shares goes to the pool with its last holder.
    if (!t.empty() && t.numel() > 0 && t.sole_owner()) pool[{t.dtype(), t.numel()}].push_back(std::move(t));
    t = Tensor();
  };
  // As InferenceSession::views_input_of: Reshape & co. between the run's own values give the output the
  // input's buffer, no kernel runs (timing their copy kernels alone put the ViT's 177 Reshapes at 11% of
  // its step, which a training step does not spend).
  const auto views_input = [&](size_t i) {
    const Node& node = g.node(order[i]);
    if (!kernels[i] || !is_reshape_of_input(node)) return false;
    const ValueId in = node.inputs[0], out = node.outputs[0];
    return !g.value(in).data && std::ranges::find(g.inputs, in) == g.inputs.end() && last_use[out.index] != SIZE_MAX;
  };

  // samples[i]: the first run of each cycle (or every run when cycle is 1); later[i]: the others;
  // finished[i]: the end of a cycle's sums that node i deferred (Stream::DeferredProduct), which a stage's
  // finish_sums computes once before its optimizer step.
  std::vector<std::vector<double>> samples(order.size()), later(order.size()), finished(order.size());
  std::map<const void*, size_t> deferred_by;  // gradient sum buffer -> the node that deferred its product
  const int warmup = std::max(0, options.warmup) * cycle, repetitions = std::max(1, options.repetitions) * cycle;
  const auto started = Clock::now();
  for (int run = 0; run < warmup + repetitions; ++run) {
    const bool first_of_cycle = run % cycle == 0;
    if (run > warmup && first_of_cycle &&
        std::chrono::duration<double>(Clock::now() - started).count() > options.max_seconds)
      break;
    std::optional<Graph> scratch;
    if (dynamic) scratch = g;
    const Graph& sizes = scratch ? *scratch : g;
    Stream stream(DeviceKind::Cpu, static_cast<uint64_t>(run));
    // As InferenceSession runs: a forward's derived weights (the single-pixel taps) are read by its backward.
    stream.enable_derived_values();
    if (cycle > 1) {
      stream.sum_outputs(&output_sums, /*defer=*/true);
      if (first_of_cycle) carried.clear();  // a new weight version
      stream.adopt_derived(carried);
    }
    for (size_t i = 0; i < order.size(); ++i) {
      const NodeId id = order[i];
      const Node& node = g.node(id);
      if (views_input(i)) {
        const ValueId out = node.outputs[0];
        if (!values[out.index].empty()) release(out);
        values[out.index] = values[node.inputs[0].index].reshaped(g.value(out).shape.static_sizes());
        if (run >= warmup) (first_of_cycle ? samples : later)[i].push_back(0.0);
        if (last_use[node.inputs[0].index] == i) release(node.inputs[0]);
        continue;
      }
      std::unique_ptr<Kernel> per_run;
      Kernel* kernel = kernels[i].get();
      if (!kernel) {
        infer_with_values(*scratch, id, values);
        per_run = prepare_kernel(*scratch, id);
        kernel = per_run.get();
      }
      std::vector<TensorView> in, out;
      for (ValueId v : node.inputs) in.push_back(v.valid() ? TensorView::of(values[v.index]) : TensorView{});
      for (ValueId v : node.outputs) {
        if (!v.valid()) {
          out.emplace_back();
          continue;
        }
        const Value& value = sizes.value(v);
        if (!values[v.index].empty()) release(v);  // an output left from the previous run
        auto sum = gradient_sums.find(v.index);
        if (sum != gradient_sums.end() && kernel->sums_output(out.size()) && !consumed[v.index]) {
          values[v.index] = sum->second;  // the kernel writes or adds into the sum itself
          Stream::start_or_continue_sum(output_sums, sum->second.raw(), !first_of_cycle);
        } else {
          values[v.index] = allocate(value.dtype, value.shape.static_sizes());
        }
        out.push_back(TensorView::of(values[v.index]));
      }
      const auto start = Clock::now();
      try {
        kernel->run(stream, in, out);
      } catch (Error& e) {
        e.at_node(node.name, node.op_type, node.domain, node.opset);
        throw;
      }
      for (ValueId v : node.outputs) {  // the session's add of a gradient its kernel did not sum
        auto sum = v.valid() ? gradient_sums.find(v.index) : gradient_sums.end();
        if (sum == gradient_sums.end() || values[v.index].raw() == sum->second.raw()) continue;
        std::span<float> into = sum->second.data<float>();
        std::span<const float> add = std::as_const(values[v.index]).data<float>();
        if (first_of_cycle)
          std::copy(add.begin(), add.end(), into.begin());
        else
          for (size_t k = 0; k < into.size(); ++k) into[k] += add[k];
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (run >= warmup) (first_of_cycle ? samples : later)[i].push_back(seconds);
      for (const TensorView& o : out)
        if (const Stream::OutputSum* sum = stream.output_sum(o.data); sum && sum->deferred) deferred_by[o.data] = i;
      if (scratch) {
        for (ValueId v : node.outputs)
          if (v.valid()) scratch->value(v).shape = Shape::of(values[v.index].sizes());
      }
      for (ValueId v : node.inputs) {
        if (v.valid() && last_use[v.index] == i && !g.value(v).data) {  // the weights stay, and what they gave
          stream.forget_derived(values[v.index].raw());                 // its buffer may hold another value next
          release(v);
        }
      }
    }
    if (cycle > 1)
      for (ValueId id : g.initializers) stream.copy_derived_of(values[id.index].raw(), carried);
    if (run % cycle == cycle - 1) {  // the cycle's sums end: the deferred products
      for (auto& [buffer, sum] : output_sums) {
        if (!sum.deferred) continue;
        const auto start = Clock::now();
        sum.deferred->finish(static_cast<float*>(const_cast<void*>(buffer)), !sum.overwrite);
        sum.deferred.reset();
        if (run >= warmup)
          finished[deferred_by.at(buffer)].push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
    }
  }

  NodeTimes times;
  times.threads = omp_get_max_threads();
  times.repetitions = static_cast<int>(samples.empty() ? 0 : samples[0].size());
  const std::vector<size_t> owner = owning_forward_node(training);
  const size_t n = training.forward_node_count;
  times.forward_seconds.assign(n, 0.0);
  times.backward_seconds.assign(n, 0.0);
  times.sum_end_seconds.assign(n, 0.0);
  for (size_t i = 0; i < order.size(); ++i) {
    const double s =
        later[i].empty() ? median(samples[i]) : (median(samples[i]) + (cycle - 1) * median(later[i])) / cycle;
    times.kernel_seconds.push_back(s);
    (i < n ? times.forward_seconds : times.backward_seconds)[owner[i]] += s;
    if (!finished[i].empty()) times.sum_end_seconds[owner[i]] += median(finished[i]);
  }
  return times;
}

std::string profile_cache_path(const std::string& model_path, int64_t batch, int micro_batches_summed) {
  const std::string mode = micro_batches_summed > 1 ? "-M" + std::to_string(micro_batches_summed) : "";
  return model_path + ".profile-B" + std::to_string(batch) + mode + ".json";
}

NodeTimes apply_profiled_times(CostProfile& profile, const TrainingGraph& training, const std::string& model_path,
                               NodeProfileOptions options) {
  const size_t n = training.forward_node_count;
  if (profile.nodes.size() != n) {
    throw Error("the cost profile has " + std::to_string(profile.nodes.size()) + " nodes, the training graph " +
                std::to_string(n) + " forward nodes");
  }
  std::vector<std::string> names, ops;
  for (const NodeCost& c : profile.nodes) {
    names.push_back(c.name);
    ops.push_back(c.op_type);
  }
  if (options.cache_path.empty() && !model_path.empty())
    options.cache_path = profile_cache_path(model_path, profile.batch, options.micro_batches_summed);

  NodeTimes times;
  std::string note;
  json key;
  if (!options.cache_path.empty()) {
    key = cache_key(model_path, profile.batch, omp_get_max_threads(), fingerprint(bound_graph(training, profile.batch)),
                    options.micro_batches_summed);
    if (options.use_cache) {
      if (std::optional<NodeTimes> cached = read_cache(options.cache_path, key, names, note))
        times = std::move(*cached);
    }
  }
  if (!times.from_cache) {
    times = measure_node_times(training, profile.batch, options);
    if (!options.cache_path.empty()) write_cache(options.cache_path, key, names, ops, times);
    if (times.cache_note.empty()) times.cache_note = note;
  }
  apply_mean_node_times(profile, std::span(&times, 1));
  return times;
}

void apply_mean_node_times(CostProfile& profile, std::span<const NodeTimes> measured) {
  ONNXTRAIN_CHECK(!measured.empty(), "apply_mean_node_times: no measurement");
  const auto count = static_cast<double>(measured.size());
  for (size_t i = 0; i < profile.nodes.size(); ++i) {
    NodeCost& node = profile.nodes[i];
    node.forward_seconds = node.backward_seconds = node.sum_end_seconds = 0;
    for (const NodeTimes& t : measured) {
      node.forward_seconds += t.forward_seconds.at(i) / count;
      node.backward_seconds += t.backward_seconds.at(i) / count;
      node.sum_end_seconds += t.sum_end_seconds.at(i) / count;
    }
  }
}

}  // namespace onnxtrain
