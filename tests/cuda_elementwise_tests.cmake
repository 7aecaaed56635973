# Tests of the elementwise CUDA kernels (included by tests/cuda_tests.cmake): the shared host/device
# functors, broadcast geometry and Dropout draws run everywhere; the CUDA-vs-reference cases skip without
# a GPU.
onnxtrain_add_test(cuda_elementwise_test SOURCES cuda_elementwise_test.cc LIBS onnxtrain_kernels LABELS unit)
