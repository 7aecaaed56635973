# kernels/cuda: elementwise sources (owned by the elementwise work): unary, binary with broadcasting,
# compare/logic/Where, Cast, ActivationGrad, Dropout/DropoutGrad. The math is kernels/elementwise_functors.h.
set(ONNXTRAIN_CUDA_ELEMENTWISE_SOURCES
  elementwise_unary.cu
  elementwise_binary.cu
  elementwise_compare_logic.cu
  elementwise_cast.cu
  elementwise_activation_grad.cu
  elementwise_dropout.cu
)
target_sources(onnxtrain_kernels_cuda PRIVATE ${ONNXTRAIN_CUDA_ELEMENTWISE_SOURCES})
# --fmad=false: nvcc would otherwise contract a·x + b into one FMA (HardSigmoid, HardSwish, Gelu...),
# rounding differently from the host code of the same functor; memory-bound kernels lose nothing by it,
# and the CUDA results then equal the reference's bit for bit wherever no libm function is involved.
set(onnxtrain_elementwise_cuda_options --fmad=false)
# GCC 12 reports -Wrestrict inside libstdc++ for plain string concatenation (GCC bug 105651; the
# top-level CMakeLists.txt disables it for C++ sources for the same reason); nvcc's host pass hits it in
# the error-message helpers these files share with the reference kernels.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND onnxtrain_elementwise_cuda_options -Xcompiler=-Wno-restrict,-Wno-maybe-uninitialized)
endif()
set_source_files_properties(${ONNXTRAIN_CUDA_ELEMENTWISE_SOURCES} PROPERTIES COMPILE_OPTIONS
                            "${onnxtrain_elementwise_cuda_options}")
