# kernels/cuda: nn sources (owned by the nn work): cuDNN convolution, pooling, BatchNorm and LRN, cuBLAS
# Gemm/MatMul. Their host-side parameter mapping is kernels/cuda/cudnn_params.h (CPU-tested). Last, a late
# addition (the unity batch before it keeps its contents): RNN/GRU/LSTM and RecurrentGrad on cuBLAS.
target_sources(onnxtrain_kernels_cuda PRIVATE
  conv.cc
  conv_grad.cc
  conv_bias_grad.cu
  pooling.cc
  pooling_direct.cu
  lrn.cc
  batch_norm.cc
  batch_norm_stats.cu
  gemm.cc
  gemm_broadcast.cu
  recurrent.cc
  recurrent.cu
)
