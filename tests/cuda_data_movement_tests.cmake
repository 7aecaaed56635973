# Tests of the CUDA data-movement kernels (included by tests/cuda_tests.cmake): the host/device index math
# runs everywhere, the kernels against the reference only where a GPU is visible.
onnxtrain_add_test(cuda_data_movement_test SOURCES cuda_data_movement_test.cc LIBS onnxtrain_kernels LABELS unit)
