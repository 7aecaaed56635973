// The one explicit table of reference kernel families.
#include "kernels/kernel.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

void register_reference_kernels(KernelRegistry& registry) {
  // --- elementwise, reductions, softmax ---
  // --- conv, matmul, pooling, normalisation, losses ---
  // --- data movement ---
  (void)registry;
}

}  // namespace onnxtrain
