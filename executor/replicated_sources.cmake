# TF-style replicated strategies in one process: central storage and an asynchronous parameter server; and
# the long-lived replica threads data parallelism runs its replicas on.
target_sources(onnxtrain_executor PRIVATE central_storage.cc parameter_server.cc worker_threads.cc replica_gradient_sum.cc sharded_optimizer_step.cc)
