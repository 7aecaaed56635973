// Reference kernels: plain loops over float32/float64 (and the int/bool types index and shape ops use),
// one file per op family. They are the test oracle for every other implementation, never the fast path.
// Each family registers itself with one function; register_reference_kernels calls them all.
#pragma once

namespace onnxtrain {

class KernelRegistry;

void register_reference_kernels(KernelRegistry& registry);

// --- elementwise, reductions, softmax (helper A section) ---
// --- conv, matmul, pooling, normalisation, losses (helper B section) ---
// --- data movement (helper C section) ---

}  // namespace onnxtrain
