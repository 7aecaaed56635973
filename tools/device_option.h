// The `--device cpu|cuda|cuda:N` option of `onnxtrain run` and `onnxtrain train`: the first of the
// devices a command uses, checked against the CUDA devices this machine has.
//
//   Device d = device_option("cuda:1", 2, 0, "--stages 2");   // cuda:1 and cuda:2 must be visible
#pragma once

#include <string>

#include "kernels/kernel.h"

namespace onnxtrain::cli {

// `value` as a Device: cpu, or cuda[:N] offset by `offset` (a launcher's local rank), when `devices`
// consecutive CUDA devices from there are visible. Throws Error when the value is malformed, no CUDA
// device is visible, or too few are ("--device cuda with --stages 4 needs cuda:0..cuda:3, but 1 CUDA
// device is visible ..."; `what` names the reason for several).
Device device_option(const std::string& value, int devices = 1, int offset = 0, const std::string& what = "");

}  // namespace onnxtrain::cli
