# Tests of the CUDA backend (included by tests/CMakeLists.txt). The CPU-side logic (caching allocator,
# shared host/device functors, geometry) runs everywhere; tests that need a GPU skip, saying so, when
# cuda::device_count() is 0. Each area lists its tests in its own file.
include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_runtime_tests.cmake OPTIONAL)
include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_elementwise_tests.cmake OPTIONAL)
include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_reduce_loss_tests.cmake OPTIONAL)
include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_nn_tests.cmake OPTIONAL)
include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_data_movement_tests.cmake OPTIONAL)
include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_optimizer_tests.cmake OPTIONAL)
include(${CMAKE_CURRENT_SOURCE_DIR}/nccl_tests.cmake OPTIONAL)

# --device cuda through the session, the trainer and the command line (its errors without a GPU).
onnxtrain_add_test(cuda_device_test SOURCES cuda_device_test.cc LIBS onnxtrain_executor onnxtrain_frontend LABELS unit)
target_compile_definitions(cuda_device_test PRIVATE ONNXTRAIN_BINARY="$<TARGET_FILE:onnxtrain>")
add_dependencies(cuda_device_test onnxtrain)

# Pipeline stages on GPUs: device values between stages of one process (transports without a GPU).
onnxtrain_add_test(cuda_pipeline_test SOURCES cuda_pipeline_test.cc LIBS onnxtrain_executor onnxtrain_frontend LABELS "unit;threads")
