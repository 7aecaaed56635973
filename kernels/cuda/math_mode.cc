// The process-wide TF32 switch of kernels/cuda/math_mode.h.
#include "kernels/cuda/math_mode.h"

#include <atomic>

namespace onnxtrain::cuda {
namespace {
std::atomic<bool> tf32_allowed{false};
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return tf32_allowed.load(std::memory_order_relaxed); }

}  // namespace onnxtrain::cuda
