// Calling one reference kernel from a test: a Call names the op, its attributes, the input tensors and
// the output descriptors; run() prepares the registered reference kernel and runs it on fresh outputs.
// The kernel tests of other implementations share the pieces: input descriptors and views of tensors
// where a default Tensor is an omitted input, and a run of a prepared kernel on fresh outputs.
//
//   Tensor y = run1({.op = "Relu", .inputs = {x}, .outputs = {{DType::Float32, {2, 3}}}});
//   spec.inputs = input_descs(inputs);
//   std::vector<Tensor> ys = run_prepared(*entry->prepare(spec), inputs, spec.outputs);
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace onnxtrain::testing_support {

template <typename T>
std::vector<T> values(const Tensor& t) {
  auto span = t.data<T>();
  return {span.begin(), span.end()};
}

// Descriptors of `tensors`, a default (Undefined) Tensor giving an absent descriptor (an omitted input).
inline std::vector<TensorDesc> input_descs(const std::vector<Tensor>& tensors) {
  std::vector<TensorDesc> descs;
  for (const Tensor& t : tensors)
    descs.push_back(t.dtype() == DType::Undefined ? TensorDesc{} : TensorDesc{t.dtype(), t.sizes()});
  return descs;
}

// Views of `tensors`, a default (Undefined) Tensor giving an absent view.
inline std::vector<TensorView> views_of(const std::vector<Tensor>& tensors) {
  std::vector<TensorView> views;
  for (const Tensor& t : tensors) views.push_back(t.dtype() == DType::Undefined ? TensorView{} : TensorView::of(t));
  return views;
}

// Runs a prepared kernel on `inputs` and fresh outputs of `outputs` (an absent descriptor stays a default
// Tensor, passed as an omitted output) on `stream` (one that keeps derived values, say); returns the outputs.
inline std::vector<Tensor> run_prepared(Stream& stream, Kernel& kernel, const std::vector<Tensor>& inputs,
                                        const std::vector<TensorDesc>& outputs) {
  std::vector<Tensor> results;
  for (const TensorDesc& d : outputs) results.push_back(d.present() ? Tensor(d.dtype, d.sizes) : Tensor());
  kernel.run(stream, views_of(inputs), views_of(results));
  return results;
}

// The same on a fresh stream with `run_index`.
inline std::vector<Tensor> run_prepared(Kernel& kernel, const std::vector<Tensor>& inputs,
                                        const std::vector<TensorDesc>& outputs, uint64_t run_index = 0) {
  Stream stream(DeviceKind::Cpu, run_index);
  return run_prepared(stream, kernel, inputs, outputs);
}

// Random contents for any fixed-size dtype (data-movement tests move every dtype): bool 0/1, float32 and
// float64 finite values in [-2, 2) unless `raw_bits`, random bytes otherwise.
inline Tensor random_any_dtype(std::mt19937& rng, DType dtype, const std::vector<int64_t>& sizes,
                               bool raw_bits = false) {
  Tensor t(dtype, sizes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<double> real(-2, 2);
  auto* p = reinterpret_cast<uint8_t*>(t.empty() ? nullptr : t.raw());
  if (dtype == DType::Bool) {
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = byte(rng) & 1;
  } else if (dtype == DType::Float32 && !raw_bits) {
    for (float& v : t.data<float>()) v = static_cast<float>(real(rng));
  } else if (dtype == DType::Float64 && !raw_bits) {
    for (double& v : t.data<double>()) v = real(rng);
  } else {
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(byte(rng));
  }
  return t;
}

// A 1-D int64 (or int32) tensor of `v`: shapes, starts, pads, axes, indices.
inline Tensor index_tensor(const std::vector<int64_t>& v, DType dtype = DType::Int64) {
  Tensor t(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::Int32)
      t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
    else
      t.data<int64_t>()[i] = v[i];
  }
  return t;
}

struct Call {
  std::string op;
  int opset = 13;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted optional input
  std::vector<TensorDesc> outputs;
};

// A case of the kernel tests that compare an implementation with the reference (cpu_elementwise_test,
// onednn_nn_test): as Call, at opset 17 and with a domain ("" or "ai.onnxtrain").
struct KernelCase {
  std::string op;
  int opset = 17;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted optional input
  std::vector<TensorDesc> outputs;
  std::string domain = "";
};

// The KernelSpec of a case (KernelCase or a test's own struct with the same fields), node name "n".
template <typename Case>
KernelSpec spec_of(const Case& c) {
  return {.op_type = c.op,
          .domain = c.domain,
          .opset = c.opset,
          .attributes = c.attributes,
          .inputs = input_descs(c.inputs),
          .outputs = c.outputs,
          .node_name = "n"};
}

// Prepares the reference kernel for the call and runs it on freshly allocated outputs.
inline std::vector<Tensor> run(const Call& call) {
  KernelSpec spec{.op_type = call.op, .opset = call.opset, .attributes = call.attributes, .node_name = "n"};
  std::vector<TensorView> in_views, out_views;
  for (const Tensor& t : call.inputs) {
    spec.inputs.push_back(t.empty() ? TensorDesc{} : TensorDesc{t.dtype(), t.sizes()});
    in_views.push_back(t.empty() ? TensorView{} : TensorView::of(t));
  }
  spec.outputs = call.outputs;
  const KernelEntry* entry =
      KernelRegistry::builtin().find("", call.op, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) throw Error("no reference kernel for " + call.op + " on " + std::string(dtype_name(kernel_dtype(spec))));
  std::unique_ptr<Kernel> kernel = entry->prepare(spec);
  std::vector<Tensor> outputs;
  for (const TensorDesc& d : call.outputs) outputs.emplace_back(d.dtype, d.sizes);
  for (Tensor& t : outputs) out_views.push_back(TensorView::of(t));
  Stream stream;
  kernel->run(stream, in_views, out_views);
  return outputs;
}

inline Tensor run1(const Call& call) { return run(call).at(0); }

// The message of the Error that running `call` throws; fails the test when it does not throw one.
inline std::string error_of(const Call& call) {
  try {
    run(call);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << call.op << " did not throw onnxtrain::Error";
  return "";
}

}  // namespace onnxtrain::testing_support
