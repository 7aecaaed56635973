// cuDNN convolution algorithm choice for conv.cc and conv_grad.cc: once per convolution shape and device
// in the process (nodes of the same shape - ResNet's repeated blocks - share one Find; each kernel also
// keeps its pick), at the first run, with cudnnFindConvolution*AlgorithmEx on the run's own buffers. Find needs
// device buffers and a stream, which prepare does not have, so it is deferred to the first run; it times
// the candidates on the stream (the host waits for it once). The candidates may use up to
// kFindWorkspaceLimit bytes of the stream's cuda::workspace (kept for later runs). From the results,
// fastest first, the first deterministic one wins (CUDNN_DETERMINISTIC: training steps reproduce
// bit for bit), else the fastest that succeeded. Its math type is set on the descriptor before each call.
// Like every kernel, a convolution kernel object runs on one host thread at a time (the first run fills
// its algorithm cache without a lock). Also what the two files share beyond the finds: per_channel_dims
// and the backward-data pass.
//
//   const std::vector<int> key = conv_problem_key(x_dims, w_dims, y_dims, window, group, dtype);   // at prepare
//   if (!forward_) forward_ = find_forward(key, handle, stream, x_desc, x, w_desc, w, conv_desc, y_desc, y);
//   ONNXTRAIN_CUDNN_CHECK(cudnnConvolutionForward(..., forward_->algo, ws, forward_->workspace, ...));
#pragma once

#if ONNXTRAIN_HAVE_CUDNN

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn_common.h"

namespace onnxtrain::cuda {

inline constexpr size_t kFindWorkspaceLimit = size_t{256} << 20;

template <typename Algo>
struct ConvAlgorithm {
  Algo algo{};
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  // Sets the algorithm's math type on `conv` (ConvGrad's two algorithms share one descriptor).
  void use(const ConvolutionDescriptor& conv) const {
    ONNXTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
  }
};

// ONNXTRAIN_CUDNN_DETERMINISTIC=0 in the environment lets the fastest algorithm win even where it is not
// deterministic (atomics in some backward passes: steps then differ in the last bits from run to run), as
// PyTorch does unless torch.backends.cudnn.deterministic is set. Read once per process.
inline bool deterministic_only_setting(const char* value) { return value == nullptr || std::string(value) != "0"; }
inline bool cudnn_deterministic_only() {
  static const bool only = deterministic_only_setting(std::getenv("ONNXTRAIN_CUDNN_DETERMINISTIC"));
  return only;
}

// The deterministic-first pick described above (with `deterministic_first` false: the fastest that ran);
// throws Error naming `what` when nothing ran.
template <typename Perf>
auto pick_algorithm(const Perf* results, int count, const char* what,
                    bool deterministic_first = cudnn_deterministic_only()) {
  const Perf* chosen = nullptr;
  for (int i = 0; i < count && !chosen && deterministic_first; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].determinism == CUDNN_DETERMINISTIC)
      chosen = &results[i];
  }
  for (int i = 0; i < count && !chosen; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS) chosen = &results[i];
  }
  if (!chosen) {
    throw Error(std::string("cuDNN found no ") + what + " algorithm for this convolution within " +
                std::to_string(kFindWorkspaceLimit >> 20) + " MiB of workspace");
  }
  return ConvAlgorithm<decltype(chosen->algo)>{chosen->algo, chosen->memory, chosen->mathType};
}

// The largest workspace any algorithm asks for, capped at kFindWorkspaceLimit (an algorithm that does
// not support the problem reports an error, ignored here: Find skips it too).
template <typename SizeOf>
size_t find_workspace_bytes(int algo_count, SizeOf&& size_of) {
  size_t most = 0;
  for (int a = 0; a < algo_count; ++a) {
    size_t bytes = 0;
    if (size_of(a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kFindWorkspaceLimit) most = std::max(most, bytes);
  }
  return most;
}

// What identifies a convolution problem for the algorithm cache: the operand dims and dtype, window, group
// and whether TF32 is allowed, read at prepare with the descriptor's math type (the direction and device
// are added by the find functions).
inline std::vector<int> conv_problem_key(const std::vector<int>& x, const std::vector<int>& w,
                                         const std::vector<int>& y, const CudnnWindow& window, int group, DType dtype) {
  std::vector<int> key{group, allow_tf32() ? 1 : 0, static_cast<int>(dtype)};
  for (const std::vector<int>* part : {&x, &w, &y, &window.pads, &window.strides, &window.dilations}) {
    key.push_back(-1);  // separator: parts of different lengths never collide
    key.insert(key.end(), part->begin(), part->end());
  }
  return key;
}

// The process-wide cache of one direction (Algo): Find runs outside the lock (two threads finding the
// same new shape both time it; the first result stays).
template <typename Algo, typename Find>
ConvAlgorithm<Algo> cached_algorithm(std::vector<int> key, const Stream& stream, Find&& find) {
  static std::mutex mutex;
  static std::map<std::vector<int>, ConvAlgorithm<Algo>> cache;
  key.push_back(stream.device_index());
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const ConvAlgorithm<Algo> found = find();
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(std::move(key), found).first->second;
}

inline ConvAlgorithm<cudnnConvolutionFwdAlgo_t> find_forward_uncached(cudnnHandle_t handle, const Stream& stream,
                                                                      const TensorDescriptor& x, const void* x_data,
                                                                      const FilterDescriptor& w, const void* w_data,
                                                                      const ConvolutionDescriptor& conv,
                                                                      const TensorDescriptor& y, void* y_data) {
  const size_t bytes = find_workspace_bytes(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, [&](int a, size_t* out) {
    return cudnnGetConvolutionForwardWorkspaceSize(handle, x.get(), w.get(), conv.get(), y.get(),
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(a), out);
  });
  void* ws = workspace(stream, bytes);
  cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  ONNXTRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, x.get(), x_data, w.get(), w_data, conv.get(),
                                                               y.get(), y_data, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                               &count, results, ws, bytes));
  return pick_algorithm(results, count, "forward");
}

inline ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t> find_backward_data_uncached(
    cudnnHandle_t handle, const Stream& stream, const FilterDescriptor& w, const void* w_data,
    const TensorDescriptor& dy, const void* dy_data, const ConvolutionDescriptor& conv, const TensorDescriptor& dx,
    void* dx_data) {
  const size_t bytes = find_workspace_bytes(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, [&](int a, size_t* out) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w.get(), dy.get(), conv.get(), dx.get(),
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(a), out);
  });
  void* ws = workspace(stream, bytes);
  cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  ONNXTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      handle, w.get(), w_data, dy.get(), dy_data, conv.get(), dx.get(), dx_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
      &count, results, ws, bytes));
  return pick_algorithm(results, count, "backward-data");
}

inline ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t> find_backward_filter_uncached(
    cudnnHandle_t handle, const Stream& stream, const TensorDescriptor& x, const void* x_data,
    const TensorDescriptor& dy, const void* dy_data, const ConvolutionDescriptor& conv, const FilterDescriptor& dw,
    void* dw_data) {
  const size_t bytes = find_workspace_bytes(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, [&](int a, size_t* out) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x.get(), dy.get(), conv.get(), dw.get(),
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), out);
  });
  void* ws = workspace(stream, bytes);
  cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int count = 0;
  ONNXTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      handle, x.get(), x_data, dy.get(), dy_data, conv.get(), dw.get(), dw_data,
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, results, ws, bytes));
  return pick_algorithm(results, count, "backward-filter");
}

// The cached finds: `key` from conv_problem_key, the rest as the uncached ones above.
template <typename... Args>
ConvAlgorithm<cudnnConvolutionFwdAlgo_t> find_forward(const std::vector<int>& key, cudnnHandle_t handle,
                                                      const Stream& stream, Args&&... args) {
  std::vector<int> k = key;
  k.push_back(0);
  return cached_algorithm<cudnnConvolutionFwdAlgo_t>(std::move(k), stream,
                                                     [&] { return find_forward_uncached(handle, stream, args...); });
}
template <typename... Args>
ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t> find_backward_data(const std::vector<int>& key, cudnnHandle_t handle,
                                                                const Stream& stream, Args&&... args) {
  std::vector<int> k = key;
  k.push_back(1);
  return cached_algorithm<cudnnConvolutionBwdDataAlgo_t>(
      std::move(k), stream, [&] { return find_backward_data_uncached(handle, stream, args...); });
}
template <typename... Args>
ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t> find_backward_filter(const std::vector<int>& key, cudnnHandle_t handle,
                                                                    const Stream& stream, Args&&... args) {
  std::vector<int> k = key;
  k.push_back(2);
  return cached_algorithm<cudnnConvolutionBwdFilterAlgo_t>(
      std::move(k), stream, [&] { return find_backward_filter_uncached(handle, stream, args...); });
}

// The (1, C, 1, ...) dims of a per-channel bias of a tensor of `dims` (N, C, ...).
inline std::vector<int> per_channel_dims(const std::vector<int>& dims) {
  std::vector<int> bias(dims.size(), 1);
  bias[1] = dims[1];
  return bias;
}

// The backward-data pass dx = W^T * dy (ConvTranspose's forward, ConvGrad's dX) with the algorithm kept
// in `algo`, found at the first call.
inline void convolution_backward_data(std::optional<ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t>>& algo,
                                      const std::vector<int>& key, cudnnHandle_t handle, Stream& stream,
                                      const FilterDescriptor& w_desc, const void* w, const TensorDescriptor& dy_desc,
                                      const void* dy, const ConvolutionDescriptor& conv,
                                      const TensorDescriptor& dx_desc, void* dx) {
  if (!algo) algo = find_backward_data(key, handle, stream, w_desc, w, dy_desc, dy, conv, dx_desc, dx);
  algo->use(conv);
  void* ws = workspace(stream, algo->workspace);
  const float one = 1.0f, zero = 0.0f;
  ONNXTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &one, w_desc.get(), w, dy_desc.get(), dy, conv.get(),
                                                     algo->algo, ws, algo->workspace, &zero, dx_desc.get(), dx));
}

}  // namespace onnxtrain::cuda

namespace onnxtrain {
void register_cuda_conv_grad_kernels(KernelRegistry& registry);  // conv_grad.cc, called by conv.cc
}  // namespace onnxtrain

#endif  // ONNXTRAIN_HAVE_CUDNN
