// Shared plumbing of the oneDNN CPU kernels (oneDNN 2.6, the v2 API: op descriptor → primitive
// descriptor → primitive): one CPU engine for the process, memory descriptors from TensorDescs, and
// error wrapping so a oneDNN failure reaches the user with the op, node and oneDNN's own message.
// Kernels built on it register with implementation "onednn", so the registry prefers them over the
// reference loops, which stay the oracle in the tests.
//
//   registry.add(onednn_entry("LRN", &make_lrn));              // default domain
//   registry.add(training_entry("LRNGrad", &make_lrn_grad));   // a backward op (ai.onnxtrain)
#pragma once

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace onnxtrain::onednn {

// The process-wide CPU engine (created on first use).
dnnl::engine& cpu_engine();

// A stream on the CPU engine; oneDNN CPU streams are cheap and execute in order.
dnnl::stream& cpu_stream();

dnnl::memory::data_type data_type_of(DType dtype);  // f32, bf16 (others: Error)
// The dtypes the oneDNN Conv, ConvGrad, Gemm and MatMul kernels take: float32, and bfloat16 where the CPU
// has it natively (cpu_has_native_bf16). Without it oneDNN has only its reference loops for bfloat16, and
// those kernels stay onnxtrain's reference ones.
bool takes_dtype(DType dtype);
dnnl::memory::dims dims_of(const std::vector<int64_t>& sizes);
// Plain row-major (abcd…) memory descriptor for the sizes.
dnnl::memory::desc plain_desc(const std::vector<int64_t>& sizes, DType dtype = DType::Float32);
// A memory object over a caller's buffer (no copy).
dnnl::memory wrap(const dnnl::memory::desc& desc, const TensorView& view);

// `chosen`, or the float32 primitive descriptor `make(layout)` builds with one tensor (N, C, spatial...) in
// blocks of 8 channels, where `chosen_layout` (oneDNN's first choice for it) pads it to 1.5x `plain` or
// more (8 channels in AVX-512's blocks of 16) and oneDNN answers with a JIT kernel for blocks of 8 (its
// AVX2 one): that kernel computes no padding, and the copy to or from the plain layout reads none.
// Conv's output with few channels (conv.cc), ConvGrad's dX with few input channels (conv_grad.cc).
template <typename PrimitiveDesc, typename Make>
PrimitiveDesc unpadded_where_blocks_pad(PrimitiveDesc chosen, const dnnl::memory::desc& chosen_layout,
                                        const dnnl::memory::desc& plain, Make&& make) {
  if (plain.data_type() != dnnl::memory::data_type::f32 || 2 * chosen_layout.get_size() < 3 * plain.get_size())
    return chosen;
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::dims dims = plain.dims();
  const tag blocks_of_8 = dims.size() == 3 ? tag::nCw8c : dims.size() == 4 ? tag::nChw8c : tag::nCdhw8c;
  try {
    PrimitiveDesc unpadded = make(dnnl::memory::desc(dims, plain.data_type(), blocks_of_8));
    if (std::string(unpadded.impl_info_str()).starts_with("jit:")) return unpadded;
  } catch (const dnnl::error&) {  // no implementation: keep the first
  }
  return chosen;
}

// `sizes` as rows: (outer, inner) split before `axis` (negative counts from the end; the reference kernel
// has validated it). LayerNormalization's view of X, forward and backward.
struct Rows {
  int64_t outer = 1, inner = 1;
};
inline Rows rows_at_axis(const std::vector<int64_t>& sizes, int64_t axis) {
  const auto rank = static_cast<int64_t>(sizes.size());
  if (axis < 0) axis += rank;
  Rows rows;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? rows.outer : rows.inner) *= sizes[d];
  return rows;
}

// Implemented by the kernels that run one oneDNN primitive (or a fixed pair) and can say which of oneDNN's
// implementations it picked (impl_info_str: "jit_bf16:avx512_core_bf16", "brg:avx512_core"). Tests find
// it with dynamic_cast; a kernel that fell back to the reference loops does not have it.
class ReportsImplementation {
 public:
  virtual ~ReportsImplementation() = default;
  virtual std::string library_implementation() const = 0;
};

// A CPU entry of the "onednn" implementation for float32 in the default domain.
inline KernelEntry onednn_entry(std::string op_type, KernelFactory factory) {
  return {.domain = "",
          .op_type = std::move(op_type),
          .device = DeviceKind::Cpu,
          .dtypes = {DType::Float32},
          .implementation = "onednn",
          .factory = factory};
}

// The same for one of onnxtrain's backward ops (domain kTrainingDomain, "ai.onnxtrain").
inline KernelEntry training_entry(std::string op_type, KernelFactory factory) {
  KernelEntry entry = onednn_entry(std::move(op_type), factory);
  entry.domain = "ai.onnxtrain";
  return entry;
}

// Runs `body`, turning dnnl::error into onnxtrain::Error naming the op and node of `spec`.
template <typename Body>
auto checked(const KernelSpec& spec, const char* what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    throw Error(spec.op_type + " (oneDNN) " + what +
                (spec.node_name.empty() ? "" : " for node '" + spec.node_name + "'") + ": " + e.what() + " (status " +
                std::to_string(static_cast<int>(e.status)) + ")");
  }
}

}  // namespace onnxtrain::onednn
