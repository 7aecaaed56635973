# kernels/cuda: data_movement sources (owned by the data_movement work)
target_sources(onnxtrain_kernels_cuda PRIVATE
  data_movement_copy.cu
  shape_constant.cu
  transpose_expand_tile.cu
  slice.cu
  gather.cu
  gather_elements.cu
  scatter_elements.cu
  gather_nd.cu
  cumsum.cu
  trilu.cu
  pad.cu
  top_k.cu
  resize.cu
  scatter_nd.cu)
