# kernels/cuda: the optimizer update kernels (per-element math: kernels/optimizer_math.h, shared with
# executor/optim/*.cc).
set(ONNXTRAIN_CUDA_OPTIMIZER_SOURCES optimizer_update.cu)
target_sources(onnxtrain_kernels_cuda PRIVATE ${ONNXTRAIN_CUDA_OPTIMIZER_SOURCES})
# --fmad=false: an FMA-contracted m·β1 + (1 − β1)·g would round differently from the host loop of the same
# functor; the updates are memory-bound, so nothing is lost, and device and host updates match bit for bit.
set_source_files_properties(${ONNXTRAIN_CUDA_OPTIMIZER_SOURCES} PROPERTIES COMPILE_OPTIONS --fmad=false)
