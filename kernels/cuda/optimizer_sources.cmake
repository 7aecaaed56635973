# kernels/cuda: the optimizer update kernels (per-element math: kernels/optimizer_math.h, shared with
# executor/optim/*.cc).
set(ONNXTRAIN_CUDA_OPTIMIZER_SOURCES optimizer_update.cu)
target_sources(onnxtrain_kernels_cuda PRIVATE ${ONNXTRAIN_CUDA_OPTIMIZER_SOURCES})
# --fmad=false: an FMA-contracted m·β1 + (1 − β1)·g would round differently from the host loop of the same
# functor; the updates are memory-bound, so nothing is lost, and device and host updates match bit for bit.
set(onnxtrain_optimizer_cuda_options --fmad=false)
# GCC 12's spurious -Wrestrict in libstdc++ string concatenation (GCC bug 105651), reached by nvcc's host
# pass through the Error helpers of cuda_check.h (as for the elementwise sources).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND onnxtrain_optimizer_cuda_options -Xcompiler=-Wno-restrict,-Wno-maybe-uninitialized)
endif()
set_source_files_properties(${ONNXTRAIN_CUDA_OPTIMIZER_SOURCES} PROPERTIES COMPILE_OPTIONS
                            "${onnxtrain_optimizer_cuda_options}")
