// The one explicit table of oneDNN kernel families.
#include "kernels/kernel.h"
#include "kernels/onednn/onednn_kernels.h"

namespace onnxtrain {

void register_onednn_kernels(KernelRegistry& registry) {
  // --- conv, matmul, gemm ---
  register_onednn_conv_kernels(registry);
  register_onednn_matmul_kernels(registry);
  // --- pooling, batch norm, eltwise, softmax, lrn, layer norm ---
  (void)registry;
}

}  // namespace onnxtrain
