# Tests of the NCCL comm backend (included by cuda_tests.cmake). Built in every configuration: without
# NCCL or without a GPU the failure paths run; the data-moving tests skip when too few GPUs are visible.
onnxtrain_add_test(nccl_comm_test SOURCES nccl_comm_test.cc LIBS onnxtrain_executor LABELS "unit;threads;cuda")
