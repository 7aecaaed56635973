# Tests of the CUDA data-movement kernels (included by tests/cuda_tests.cmake): the host/device index math
# runs everywhere, the kernels against the reference only where a GPU is visible.
onnxtrain_add_test(cuda_data_movement_test SOURCES cuda_data_movement_test.cc LIBS onnxtrain_kernels LABELS unit)
# GatherElements, ScatterElements, GatherND and their backward ops (kernels/cuda/element_index.h), the same
# way; both share tests/cuda_data_movement_cases.h.
onnxtrain_add_test(cuda_element_index_test SOURCES cuda_element_index_test.cc LIBS onnxtrain_kernels LABELS unit)
