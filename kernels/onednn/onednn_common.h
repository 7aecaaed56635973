// Shared plumbing of the oneDNN CPU kernels (oneDNN 2.6, the v2 API: op descriptor → primitive
// descriptor → primitive): one CPU engine for the process, memory descriptors from TensorDescs, and
// error wrapping so a oneDNN failure reaches the user with the op, node and oneDNN's own message.
// Kernels built on it register with implementation "onednn", so the registry prefers them over the
// reference loops, which stay the oracle in the tests.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace onnxtrain::onednn {

// The process-wide CPU engine (created on first use).
dnnl::engine& cpu_engine();

// A stream on the CPU engine; oneDNN CPU streams are cheap and execute in order.
dnnl::stream& cpu_stream();

dnnl::memory::data_type data_type_of(DType dtype);  // f32 (others: Error)
dnnl::memory::dims dims_of(const std::vector<int64_t>& sizes);
// Plain row-major (abcd…) memory descriptor for the sizes.
dnnl::memory::desc plain_desc(const std::vector<int64_t>& sizes, DType dtype = DType::Float32);
// A memory object over a caller's buffer (no copy).
dnnl::memory wrap(const dnnl::memory::desc& desc, const TensorView& view);

// Runs `body`, turning dnnl::error into onnxtrain::Error naming the op and node of `spec`.
template <typename Body>
auto checked(const KernelSpec& spec, const char* what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    throw Error(spec.op_type + " (oneDNN) " + what + (spec.node_name.empty() ? "" : " for node '" + spec.node_name + "'") +
                ": " + e.what() + " (status " + std::to_string(static_cast<int>(e.status)) + ")");
  }
}

}  // namespace onnxtrain::onednn
