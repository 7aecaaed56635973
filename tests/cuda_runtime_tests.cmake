# Tests of the CUDA runtime layer (included by tests/cuda_tests.cmake). The caching allocator (and the
# host batch pool built on it, executor/host_memory.h) is plain
# C++ and runs everywhere; cuda_runtime_test checks the no-device errors everywhere and skips its GPU
# cases, saying so, when no CUDA device is visible.
onnxtrain_add_test(caching_allocator_test SOURCES caching_allocator_test.cc LIBS onnxtrain_executor LABELS "unit;threads")
onnxtrain_add_test(cuda_runtime_test SOURCES cuda_runtime_test.cc LIBS onnxtrain_kernels LABELS "unit;cuda")
if(ONNXTRAIN_HAVE_CUDA)
  # The cuda_context.h cases call cuBLAS (and cuDNN) directly, so they need the vendor headers and libraries.
  target_link_libraries(cuda_runtime_test PRIVATE CUDA::cudart CUDA::cublas)
  target_compile_definitions(cuda_runtime_test PRIVATE ONNXTRAIN_HAVE_CUDNN=$<BOOL:${ONNXTRAIN_HAVE_CUDNN}>)
  if(ONNXTRAIN_HAVE_CUDNN)
    target_link_libraries(cuda_runtime_test PRIVATE CUDNN::cudnn)
  endif()
endif()
