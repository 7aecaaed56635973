# kernels/cuda: runtime sources (owned by the runtime work): streams, events, device memory through the
# caching allocator, copies (cuda_runtime.cc) and what kernels get from their Stream (cuda_context.cc).
# Host code only, compiled by the C++ compiler against the CUDA headers.
target_sources(onnxtrain_kernels_cuda PRIVATE cuda_runtime.cc cuda_context.cc)
