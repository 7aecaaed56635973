# TF-style replicated strategies in one process: central storage and an asynchronous parameter server.
target_sources(onnxtrain_executor PRIVATE central_storage.cc parameter_server.cc)
