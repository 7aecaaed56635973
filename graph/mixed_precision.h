// Mixed-precision training as PyTorch's autocast does it, as a graph rewrite: the compute-bound ops
// (Conv, Gemm, MatMul) read their operands cast to bfloat16 or float16, compute in that type (float
// accumulation in the kernels) and their result is cast back to float32; everything else (normalisation,
// softmax, losses, elementwise, the optimizer) stays float32, and so do the initializers: they are the
// float32 master weights, and the Cast nodes' gradient rule brings their gradients back to float32.
//
//   attach_loss(graph, spec);
//   MixedPrecisionReport r = apply_mixed_precision(graph, Precision::bf16);   // before build_training_graph
//
// Biases never enter half precision: Conv's B becomes a float32 Add after the cast back (B reshaped to
// (M,1,..,1)), Gemm's C a float32 Add and its alpha/beta float32 Muls, so the only half ops are the three
// above, the CPU's FusedMatMul (below) and Cast, and their gradient rules emit only ConvGrad, Gemm, MatMul,
// FusedMatMul and data movement in half.
// MatMul's batch axes must not broadcast (its gradient would sum over them, a ReduceSum in half): a linear
// layer on a sequence, (..., M, K) × a static (K, N), runs as one (·, K) × (K, N) product between float32
// Reshapes; any other MatMul whose batch sizes are not known equal (static, or the same symbol) stays float32.
// A FusedMatMul (graph/autodiff/fused_matmul.h: the CPU fuses MatMuls before autocast) reads its operands cast
// as MatMul's, rows against a matrix included (its gradient rule multiplies over the flattened rows), and
// writes its float32 result itself (float32_output): no cast back, and its float32 bias and its alpha (the
// folded constant scalings) stay in the product, accumulated in float32 before the one rounding to float32.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

enum class Precision { fp32, bf16, fp16 };

// "fp32" | "bf16" | "fp16"; throws Error listing the choices.
Precision precision_from_name(const std::string& name);
std::string precision_name(Precision precision);
// bfloat16 or float16 for bf16 / fp16; float32 for fp32.
DType compute_dtype(Precision precision);

struct MixedPrecisionReport {
  std::vector<std::string> half_nodes;  // the nodes now computing in half, by name
};

// On the CPU two kinds of Conv stay float32 under autocast, where oneDNN 2.6's half-precision gradient runs
// several times slower than onnxtrain's float32 kernels (README "Mixed precision"): a Conv whose input X has
// fewer channels than kHalfConvMinChannels (a stem reading the image; 1.8-2.7x slower) and a depthwise Conv
// (group = X's channels > 1: MobileNetV2's, 9x slower).
inline constexpr int64_t kHalfConvMinChannels = 4;
// Whether `n` is such a Conv (X's channel count known).
bool conv_stays_float32_on_cpu(const Graph& graph, const Node& n);

// Whether `n` is the CPU's FusedMatMul (ai.onnxtrain; graph/autodiff/fused_matmul.h), which autocast casts
// as MatMul and which can write float32 over half operands (float32_output).
bool is_fused_matmul(const Node& n);

struct AutocastOptions {
  bool cpu_float32_convs = false;  // the CPU's choice: conv_stays_float32_on_cpu nodes stay float32
};

// Rewrites `graph` in place (fp32: unchanged). Nodes whose float inputs are not all float32 are left alone.
MixedPrecisionReport apply_mixed_precision(Graph& graph, Precision precision, const AutocastOptions& options = {});

}  // namespace onnxtrain
