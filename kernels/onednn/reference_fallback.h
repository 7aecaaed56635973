// How the oneDNN Conv/MatMul/Gemm kernels handle a variant they do not map onto a oneDNN primitive
// (an unusual spatial rank, a zero-size tensor, a broadcast oneDNN lacks): their factory returns the
// reference kernel for the same spec instead. The registry picks "onednn" whenever it is registered for
// the dtype, so refusing at prepare would fail the user's model; this is the same device (CPU), so it is
// not the silent cross-device fallback that docs/design.md (3.3) forbids, only a slower implementation.
//
//   if (!supported) return onednn::reference_kernel(spec);
#pragma once

#include <memory>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace onnxtrain::onednn {

inline std::unique_ptr<Kernel> reference_kernel(const KernelSpec& spec) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) throw Error(spec.op_type + ": no reference kernel to fall back on");
  return entry->prepare(spec);
}

}  // namespace onnxtrain::onednn
