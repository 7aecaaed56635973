# Tests of the optimizer update functors and their CUDA kernels (included by tests/cuda_tests.cmake): the
# functors against the executor's optimizer step run everywhere; the CUDA-vs-host cases skip without a GPU.
onnxtrain_add_test(cuda_optimizer_test SOURCES cuda_optimizer_test.cc LIBS onnxtrain_executor onnxtrain_kernels LABELS unit)
