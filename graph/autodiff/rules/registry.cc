// The one explicit table of gradient rules: (domain, op) → rule. Adding a differentiable op adds its
// schema, its rule file and one line here (and a case in tests/gradient_cases/).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain {

namespace {

GradientRegistry make_builtin_gradients() {
  using namespace gradient_rules;
  GradientRegistry r;
  // --- elementwise arithmetic and activations ---
  r.add("", "Add", &add_gradient);
  r.add("", "Sub", &sub_gradient);
  r.add("", "Mul", &mul_gradient);
  r.add("", "Div", &div_gradient);
  r.add("", "Mod", &mod_gradient);
  r.add("", "TopK", &top_k_gradient);
  r.add("", "Pow", &pow_gradient);
  r.add("", "Neg", &neg_gradient);
  for (const char* op : {"Relu",     "LeakyRelu",   "Elu",       "Selu",  "Sigmoid", "Tanh", "Gelu", "Erf",
                         "Softplus", "HardSigmoid", "HardSwish", "Abs",   "Sqrt",    "Exp",  "Log",  "Reciprocal",
                         "Sin",      "Cos",         "Ceil",      "Floor", "Sign",    "Mish", "Celu"}) {
    r.add("", op, &activation_gradient);
  }
  r.add("", "Clip", &clip_gradient);
  r.add("", "PRelu", &prelu_gradient);
  r.add("", "Where", &where_gradient);
  r.add("", "Max", &max_min_gradient);
  r.add("", "Min", &max_min_gradient);
  r.add("", "Sum", &sum_mean_gradient);
  r.add("", "Mean", &sum_mean_gradient);
  r.add("", "Cast", &cast_gradient);
  r.add("", "CastLike", &cast_gradient);
  r.add("", "Identity", &identity_gradient);
  // --- end elementwise ---

  // --- data movement ---
  r.add("", "Reshape", &reshape_gradient);
  r.add("", "Flatten", &reshape_gradient);
  r.add("", "Squeeze", &reshape_gradient);
  r.add("", "Unsqueeze", &reshape_gradient);
  r.add("", "Transpose", &transpose_gradient);
  r.add("", "Concat", &concat_gradient);
  r.add("", "Split", &split_gradient);
  r.add("", "Slice", &slice_gradient);
  r.add("", "Gather", &gather_gradient);
  r.add("", "CumSum", &cumsum_gradient);
  r.add("", "Trilu", &trilu_gradient);
  r.add("", "Expand", &expand_gradient);
  r.add("", "Tile", &tile_gradient);
  r.add("", "Pad", &pad_gradient);
  r.add("", "Resize", &resize_gradient);
  r.add("", "Upsample", &resize_gradient);
  r.add("", "DepthToSpace", &depth_space_gradient);
  r.add("", "SpaceToDepth", &depth_space_gradient);
  r.add("", "GatherElements", &gather_elements_gradient);
  r.add("", "ScatterElements", &scatter_elements_gradient);
  r.add("", "GatherND", &gather_nd_gradient);
  r.add("", "ScatterND", &scatter_nd_gradient);
  for (const char* op : {"RNN", "GRU", "LSTM"}) r.add("", op, &recurrent_gradient);
  r.add("", "Dropout", &dropout_gradient);
  // --- end data movement ---

  // --- conv, gemm, matmul ---
  r.add("", "Conv", &conv_gradient);
  r.add("", "ConvTranspose", &conv_transpose_gradient);
  r.add(kTrainingDomain, "TapMajorConv", &tap_major_conv_gradient);
  r.add(kTrainingDomain, "FusedMatMul", &fused_matmul_gradient);
  r.add("", "Gemm", &gemm_gradient);
  r.add("", "MatMul", &matmul_gradient);
  // --- end conv, gemm, matmul ---

  // --- pooling, softmax, LRN ---
  r.add("", "MaxPool", &max_pool_gradient);
  r.add("", "AveragePool", &average_pool_gradient);
  r.add("", "GlobalAveragePool", &global_average_pool_gradient);
  r.add("", "GlobalMaxPool", &global_max_pool_gradient);
  r.add("", "Softmax", &softmax_gradient);
  r.add("", "LogSoftmax", &log_softmax_gradient);
  r.add("", "LRN", &lrn_gradient);
  // --- end pooling, softmax, LRN ---

  // --- normalisation ---
  r.add("", "BatchNormalization", &batch_norm_gradient);
  r.add("", "InstanceNormalization", &instance_norm_gradient);
  r.add("", "LayerNormalization", &layer_norm_gradient);
  // --- end normalisation ---

  // --- reductions and losses ---
  r.add("", "ReduceSum", &reduce_sum_gradient);
  r.add("", "ReduceMean", &reduce_mean_gradient);
  r.add("", "ReduceMax", &reduce_max_min_gradient);
  r.add("", "ReduceMin", &reduce_max_min_gradient);
  r.add("", "ReduceProd", &reduce_prod_gradient);
  r.add("", "ReduceSumSquare", &reduce_sum_square_gradient);
  r.add("", "ReduceLogSum", &reduce_log_sum_gradient);
  r.add("", "ReduceLogSumExp", &reduce_log_sum_exp_gradient);
  r.add("", "ReduceL1", &reduce_l1_gradient);
  r.add("", "ReduceL2", &reduce_l2_gradient);
  r.add("", "SoftmaxCrossEntropyLoss", &softmax_cross_entropy_loss_gradient);
  r.add("", "NegativeLogLikelihoodLoss", &negative_log_likelihood_loss_gradient);
  // --- end reductions and losses ---
  return r;
}

}  // namespace

const GradientRegistry& GradientRegistry::builtin() {
  static const GradientRegistry registry = make_builtin_gradients();
  return registry;
}

}  // namespace onnxtrain
