# kernels/cuda: reduce_loss sources (owned by the reduce_loss work): Reduce*/ArgMax/ArgMin, Softmax and
# LogSoftmax (+grads), the losses (+grads), LayerNormalization and InstanceNormalization (+grads). Each
# family is a .cc (prepare-time checks with the reference's plumbing, registration; host C++ so the
# reference headers compile under the C++ compiler's warning settings) and a .cu (kernels and launchers).
target_sources(onnxtrain_kernels_cuda PRIVATE
  reduce.cc reduce.cu
  softmax.cc softmax.cu
  loss.cc loss.cu
  layer_norm.cc instance_norm.cc layer_norm.cu)
