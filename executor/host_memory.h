// Host memory policy for training processes: freed tensor buffers stay mapped in the process instead of
// going back to the OS, so the next step's buffers of the same sizes do not page-fault again.
//
// Why: glibc serves blocks above its mmap threshold (128 KiB at start, raised on the fly) with fresh
// mmaps and trims the heap top above 128 KiB of free space, both per free. A training step frees and
// re-allocates its activations every step (a pipeline stage's graph outputs most of all), and each
// fresh page costs a fault plus zeroing: measured on the 2-stage ResNet pipeline of
// partition_timing_test (batch 16, one thread), 667 minor faults and 18.9 ms per mini-batch before,
// 0 faults and 16.7 ms after. The price is that the process keeps its peak heap (PyTorch's CUDA caching
// allocator makes the same trade on the GPU).
//
//   retain_freed_host_memory();   // once per process; InferenceSession's constructor calls it
#pragma once

#include <cstdint>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain {

// Sets glibc's M_MMAP_THRESHOLD to 32 MiB (its maximum) and M_TRIM_THRESHOLD to 1 GiB, once per
// process. Does nothing when the user tunes malloc already (any MALLOC_*_ variable or GLIBC_TUNABLES in
// the environment) or when malloc is not glibc's (sanitizers replace it; mallopt is then a no-op).
void retain_freed_host_memory();

// A host tensor from a process-wide cache of freed blocks (kernels/caching_allocator.h, 64-byte aligned;
// a block is reused as soon as its tensor's last copy goes), its contents left as they were: the caller
// writes every element. For a data loader's batches on the CPU (tools/train_common.cc batch_allocator): at
// ImageNet size a batch is beyond glibc's largest mmap threshold (64 images of 3x224x224 floats: 38.5 MB),
// so a plain Tensor is a fresh mapping every batch whose pages fault in and are zeroed by the kernel (a
// batch of synthetic 224x224 data took 90 ms on the 2-core CI machine, mostly in the kernel).
Tensor recycled_host_tensor(DType dtype, std::vector<int64_t> sizes);

}  // namespace onnxtrain
