// What the two halves of the CUDA runtime (cuda_runtime.cc, cuda_context.cc) share and nobody else
// needs: the per-device caching allocator and the hook that drops a dying stream's workspaces.
#pragma once

#include "kernels/caching_allocator.h"

namespace onnxtrain::cuda::detail {

// The caching allocator of cuda:`device` (cudaMalloc/cudaFree behind it), created on first use; throws
// Error when the device does not exist. Stream keys are cudaStream_t values.
CachingAllocator& device_allocator(int device);

// Returns the workspaces that cuda_context.cc keeps for (device, stream) to the allocator; ~DeviceStream
// calls it after synchronising the stream.
void release_stream_workspaces(int device, const void* stream);

}  // namespace onnxtrain::cuda::detail
