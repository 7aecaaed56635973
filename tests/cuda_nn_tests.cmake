# Tests of the cuDNN/cuBLAS kernels (included by tests/cuda_tests.cmake). The parameter mapping of
# kernels/cuda/cudnn_params.h runs everywhere; the kernels against the reference need a GPU and skip,
# saying so, without one.
onnxtrain_add_test(cuda_nn_test SOURCES cuda_nn_test.cc LIBS onnxtrain_kernels LABELS "unit;cuda")
target_compile_definitions(cuda_nn_test PRIVATE ONNXTRAIN_HAVE_CUDNN=$<BOOL:${ONNXTRAIN_HAVE_CUDNN}>)
onnxtrain_add_test(cuda_precision_test SOURCES cuda_precision_test.cc LIBS onnxtrain_kernels LABELS "unit;cuda")
target_compile_definitions(cuda_precision_test PRIVATE ONNXTRAIN_HAVE_CUDNN=$<BOOL:${ONNXTRAIN_HAVE_CUDNN}>)
