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
set_source_files_properties(${ONNXTRAIN_CUDA_ELEMENTWISE_SOURCES} PROPERTIES COMPILE_OPTIONS --fmad=false)
