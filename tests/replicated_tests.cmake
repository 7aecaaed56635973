# TF-style replicated strategies in one process: central storage, the asynchronous parameter server, and
# their command line.
onnxtrain_add_test(central_storage_test SOURCES central_storage_test.cc LIBS onnxtrain_executor onnxtrain_frontend LABELS "unit;threads")
onnxtrain_add_test(parameter_server_test SOURCES parameter_server_test.cc LIBS onnxtrain_executor onnxtrain_frontend LABELS "unit;threads")
# The CLI test runs the onnxtrain binary (not built by the TSan stage), so it is not labelled threads.
onnxtrain_add_test(replicated_cli_test SOURCES replicated_cli_test.cc LIBS onnxtrain_frontend LABELS unit)
target_compile_definitions(replicated_cli_test PRIVATE ONNXTRAIN_BINARY="$<TARGET_FILE:onnxtrain>")
add_dependencies(replicated_cli_test onnxtrain)
onnxtrain_add_test(replica_gradient_sum_test SOURCES replica_gradient_sum_test.cc LIBS onnxtrain_executor LABELS "unit;threads")
