# Tests of the CUDA reductions, softmax, losses and normalisations (included by tests/cuda_tests.cmake).
# The index geometry runs everywhere; with CUDA compiled in, the registrations and prepare-time errors run
# without a device and the comparisons with the reference kernels skip, saying so, when no GPU is visible.
onnxtrain_add_test(cuda_reduce_loss_test SOURCES cuda_reduce_loss_test.cc LIBS onnxtrain_kernels LABELS "unit;cuda")
