// The elementwise CUDA kernels of RNN, GRU and LSTM and of their RecurrentGrad (launchers: recurrent_launch.h):
// one thread per (batch row, hidden unit) of a step, the equations of kernels/reference/recurrent_forward.h
// and recurrent_grad.cc in the element type (the products around them are cuBLAS's, in recurrent.cc).
// A thread reads and writes only its own element of the running state and its gradient, which is why the
// kernels update them in place. Gate j of gate block q sits at column q·H + j of a (·, G·H) row.
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_error_flag.h"
#include "kernels/cuda/recurrent_launch.h"
#include "kernels/cuda/reduce_block.cuh"

namespace onnxtrain::cuda {
namespace {

constexpr int kRecurrentBlock = 256;

template <typename T>
__device__ __forceinline__ T sigmoid_of(T v) {
  if constexpr (sizeof(T) == 4) {
    return 1.0f / (1.0f + expf(-v));
  } else {
    return 1.0 / (1.0 + exp(-v));
  }
}

template <typename T>
__device__ __forceinline__ T tanh_of(T v) {
  if constexpr (sizeof(T) == 4) {
    return tanhf(v);
  } else {
    return tanh(v);
  }
}

unsigned int recurrent_grid(int64_t elements) {
  return grid_blocks((elements + kRecurrentBlock - 1) / kRecurrentBlock);
}

// Grid-stride loop over the step's N·H elements: body(n, j, element index n·H + j, row of n).
template <typename T, typename Body>
__device__ __forceinline__ void for_each_unit(const RecurrentStep<T>& s, Body body) {
  const int64_t count = s.batch * s.hidden;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = e / s.hidden;
    body(n, e - n * s.hidden, e, s.first_row + n * s.row_stride);
  }
}

__device__ __forceinline__ int64_t gate_count(RecurrentCellType cell) {
  return cell == RecurrentCellType::Rnn ? 1 : cell == RecurrentCellType::Gru ? 3 : 4;
}

__global__ void lengths_kernel(const void* sequence_lens, bool int64_lengths, int64_t batch, int64_t steps,
                               int64_t* lengths, int* flag) {
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n < batch;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t v = steps;
    if (sequence_lens) {
      v = int64_lengths ? static_cast<const int64_t*>(sequence_lens)[n]
                        : static_cast<int64_t>(static_cast<const int32_t*>(sequence_lens)[n]);
    }
    if (v < 0 || v > steps) {
      if (flag) raise_flag(flag, kBadSequenceLength);
      v = v < 0 ? 0 : steps;
    }
    lengths[n] = v;
  }
}

// The r gate of a GRU step (needs z and r pre-activations only, not H·Rhᵀ).
template <typename T>
__device__ __forceinline__ T gru_reset_gate(const RecurrentStep<T>& s, int64_t j, int64_t n, int64_t row) {
  const int64_t gh = 3 * s.hidden, q = s.hidden + j;
  T v = s.xw[row * gh + q] + s.hr[n * gh + q];
  if (s.wb) v += s.wb[q] + s.rb[q];
  return sigmoid_of(v);
}

template <typename T>
__global__ void __launch_bounds__(kRecurrentBlock) gru_reset_product_kernel(RecurrentStep<T> s) {
  for_each_unit(s, [&](int64_t n, int64_t j, int64_t e, int64_t row) {
    const bool active = s.time < s.lengths[n];
    s.tape.reset_h[row * s.hidden + j] = active ? gru_reset_gate(s, j, n, row) * s.h[e] : T(0);
  });
}

template <typename T>
__global__ void __launch_bounds__(kRecurrentBlock) recurrent_cell_kernel(RecurrentStep<T> s) {
  const int64_t hs = s.hidden, gh = gate_count(s.cell) * hs;
  for_each_unit(s, [&](int64_t n, int64_t j, int64_t e, int64_t row) {
    const bool lstm = s.cell == RecurrentCellType::Lstm;
    const T h_prev = s.h[e], c_prev = lstm ? s.c[e] : T(0);
    const RecurrentTape<T>& tape = s.tape;
    if (tape.h_prev) tape.h_prev[row * hs + j] = h_prev;
    if (tape.c_prev) tape.c_prev[row * hs + j] = c_prev;
    T* gates = tape.gates ? tape.gates + row * gh : nullptr;
    T* y = s.y ? s.y + n * s.y_stride + j : nullptr;
    if (s.time >= s.lengths[n]) {  // past the row's length: the state stays, Y's row is 0
      if (y) *y = T(0);
      if (gates) {
        for (int64_t q = j; q < gh; q += hs) gates[q] = T(0);
      }
      if (tape.c) tape.c[row * hs + j] = c_prev;
      if (tape.h_linear) tape.h_linear[row * hs + j] = T(0);
      return;  // h and c unchanged
    }
    // X·Wᵀ + H·Rᵀ + Wb + Rb of gate element q (for GRU's h gate without its R side).
    auto pre = [&](int64_t q, bool with_r) {
      T v = s.xw[row * gh + q] + (with_r ? s.hr[n * gh + q] : T(0));
      if (s.wb) v += s.wb[q] + (with_r ? s.rb[q] : T(0));
      return v;
    };
    T out;
    if (s.cell == RecurrentCellType::Rnn) {
      out = s.relu ? max(pre(j, true), T(0)) : tanh_of(pre(j, true));
      if (gates) gates[j] = out;
    } else if (s.cell == RecurrentCellType::Gru) {
      const T z = sigmoid_of(pre(j, true)), r = sigmoid_of(pre(hs + j, true));
      // The h gate's R side: r ⊙ (H·Rhᵀ + Rbh), or (r ⊙ H)·Rhᵀ + Rbh (hr holds the product already).
      T linear = s.hr[n * gh + 2 * hs + j] + (s.rb ? s.rb[2 * hs + j] : T(0));
      if (s.linear_before_reset) {
        if (tape.h_linear) tape.h_linear[row * hs + j] = linear;
        linear *= r;
      }
      const T candidate = tanh_of(pre(2 * hs + j, false) + linear);
      out = (T(1) - z) * candidate + z * h_prev;
      if (gates) gates[j] = z, gates[hs + j] = r, gates[2 * hs + j] = candidate;
    } else {
      const T* p = s.p;
      const T input_gate = sigmoid_of(pre(j, true) + (p ? p[j] * c_prev : T(0)));
      const T forget_gate = sigmoid_of(pre(2 * hs + j, true) + (p ? p[2 * hs + j] * c_prev : T(0)));
      const T candidate = tanh_of(pre(3 * hs + j, true));
      const T c_next = forget_gate * c_prev + input_gate * candidate;
      const T output_gate = sigmoid_of(pre(hs + j, true) + (p ? p[hs + j] * c_next : T(0)));
      out = output_gate * tanh_of(c_next);
      s.c[e] = c_next;
      if (tape.c) tape.c[row * hs + j] = c_next;
      if (gates) {
        gates[j] = input_gate, gates[hs + j] = output_gate, gates[2 * hs + j] = forget_gate;
        gates[3 * hs + j] = candidate;
      }
    }
    s.h[e] = out;
    if (y) *y = out;
  });
}

template <typename T>
__global__ void __launch_bounds__(kRecurrentBlock) recurrent_cell_grad_kernel(RecurrentStep<T> s) {
  const int64_t hs = s.hidden, gh = gate_count(s.cell) * hs;
  for_each_unit(s, [&](int64_t n, int64_t j, int64_t e, int64_t row) {
    T* dgx = s.dgx + row * gh;
    T* dgh = s.dgh + row * gh;
    if (s.time >= s.lengths[n]) {  // the step did not run for this row: the gradients pass through
      for (int64_t q = j; q < gh; q += hs) dgx[q] = T(0), dgh[q] = T(0);
      return;  // dh and dc unchanged
    }
    const T dh = s.dh[e] + (s.dy ? s.dy[n * s.y_stride + j] : T(0));
    const T* gates = s.tape.gates + row * gh;
    if (s.cell == RecurrentCellType::Rnn) {
      dgx[j] = dgh[j] = dh * (s.relu ? (gates[j] > T(0) ? T(1) : T(0)) : T(1) - gates[j] * gates[j]);
      s.dh[e] = T(0);
    } else if (s.cell == RecurrentCellType::Lstm) {
      const T* p = s.p;
      const T input_gate = gates[j], output_gate = gates[hs + j], forget_gate = gates[2 * hs + j];
      const T candidate = gates[3 * hs + j];
      const T c_prev = s.tape.c_prev[row * hs + j], c_next = s.tape.c[row * hs + j];
      const T tanh_c = tanh_of(c_next);
      const T d_output = dh * tanh_c * output_gate * (T(1) - output_gate);
      T dc = s.dc[e] + dh * output_gate * (T(1) - tanh_c * tanh_c);
      if (p) dc += d_output * p[hs + j];
      const T d_input = dc * candidate * input_gate * (T(1) - input_gate);
      const T d_forget = dc * c_prev * forget_gate * (T(1) - forget_gate);
      const T d_candidate = dc * input_gate * (T(1) - candidate * candidate);
      s.dc[e] = dc * forget_gate + (p ? d_input * p[j] + d_forget * p[2 * hs + j] : T(0));
      dgx[j] = d_input, dgx[hs + j] = d_output, dgx[2 * hs + j] = d_forget, dgx[3 * hs + j] = d_candidate;
      if (dgh != dgx) {
        for (int64_t q = j; q < gh; q += hs) dgh[q] = dgx[q];
      }
      s.dh[e] = T(0);
    } else {
      const T z = gates[j], r = gates[hs + j], candidate = gates[2 * hs + j];
      const T h_prev = s.tape.h_prev[row * hs + j];
      const T d_update = dh * (h_prev - candidate) * z * (T(1) - z);
      const T d_candidate = dh * (T(1) - z) * (T(1) - candidate * candidate);
      dgx[j] = dgh[j] = d_update;
      dgx[2 * hs + j] = d_candidate;
      s.dh[e] = dh * z;
      if (s.linear_before_reset) {
        const T d_reset = d_candidate * s.tape.h_linear[row * hs + j] * r * (T(1) - r);
        dgx[hs + j] = dgh[hs + j] = d_reset;
        dgh[2 * hs + j] = d_candidate * r;
      } else {
        dgh[2 * hs + j] = d_candidate;  // the r gate waits for drh (gru_reset_grad_kernel)
      }
    }
  });
}

template <typename T>
__global__ void __launch_bounds__(kRecurrentBlock) gru_reset_grad_kernel(RecurrentStep<T> s) {
  const int64_t hs = s.hidden, gh = 3 * hs;
  for_each_unit(s, [&](int64_t n, int64_t j, int64_t e, int64_t row) {
    if (s.time >= s.lengths[n]) return;
    const T r = s.tape.gates[row * gh + hs + j], drh = s.drh[e];
    const T d_reset = drh * s.tape.h_prev[row * hs + j] * r * (T(1) - r);
    s.dgx[row * gh + hs + j] = s.dgh[row * gh + hs + j] = d_reset;
    s.dh[e] += drh * r;
  });
}

template <typename T>
__global__ void column_sums_kernel(const T* m, int64_t rows, int64_t cols, int64_t ld, T* out) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < cols;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row) sum += static_cast<double>(m[row * ld + k]);
    out[k] = static_cast<T>(sum);
  }
}

// Column k of P's gradient is gate column k (P is i, o, f; the gates start i, o, f); o reads the new c.
template <typename T>
__global__ void peephole_grad_kernel(const T* dgx, const T* c_prev, const T* c, int64_t rows, int64_t hidden, T* dp) {
  const int64_t gh = 4 * hidden;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < 3 * hidden;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = k % hidden;
    const T* state = k / hidden == 1 ? c : c_prev;
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row) {
      sum += static_cast<double>(dgx[row * gh + k]) * static_cast<double>(state[row * hidden + j]);
    }
    dp[k] = static_cast<T>(sum);
  }
}

}  // namespace

void launch_recurrent_lengths(const void* sequence_lens, bool int64_lengths, int64_t batch, int64_t steps,
                              int64_t* lengths, int* flag, cudaStream_t stream) {
  if (batch == 0) return;
  lengths_kernel<<<recurrent_grid(batch), kRecurrentBlock, 0, stream>>>(sequence_lens, int64_lengths, batch, steps,
                                                                        lengths, flag);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(lengths_kernel);
}

template <typename T>
void launch_gru_reset_product(const RecurrentStep<T>& step, cudaStream_t stream) {
  gru_reset_product_kernel<T><<<recurrent_grid(step.batch * step.hidden), kRecurrentBlock, 0, stream>>>(step);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(gru_reset_product_kernel<T>);
}

template <typename T>
void launch_recurrent_cell(const RecurrentStep<T>& step, cudaStream_t stream) {
  recurrent_cell_kernel<T><<<recurrent_grid(step.batch * step.hidden), kRecurrentBlock, 0, stream>>>(step);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(recurrent_cell_kernel<T>);
}

template <typename T>
void launch_recurrent_cell_grad(const RecurrentStep<T>& step, cudaStream_t stream) {
  recurrent_cell_grad_kernel<T><<<recurrent_grid(step.batch * step.hidden), kRecurrentBlock, 0, stream>>>(step);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(recurrent_cell_grad_kernel<T>);
}

template <typename T>
void launch_gru_reset_grad(const RecurrentStep<T>& step, cudaStream_t stream) {
  gru_reset_grad_kernel<T><<<recurrent_grid(step.batch * step.hidden), kRecurrentBlock, 0, stream>>>(step);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(gru_reset_grad_kernel<T>);
}

template <typename T>
void launch_recurrent_column_sums(const T* m, int64_t rows, int64_t cols, int64_t ld, T* out, cudaStream_t stream) {
  if (cols == 0) return;
  column_sums_kernel<T><<<recurrent_grid(cols), kRecurrentBlock, 0, stream>>>(m, rows, cols, ld, out);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(column_sums_kernel<T>);
}

template <typename T>
void launch_peephole_grad(const T* dgx, const T* c_prev, const T* c, int64_t rows, int64_t hidden, T* dp,
                          cudaStream_t stream) {
  if (hidden == 0) return;
  peephole_grad_kernel<T><<<recurrent_grid(3 * hidden), kRecurrentBlock, 0, stream>>>(dgx, c_prev, c, rows, hidden, dp);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(peephole_grad_kernel<T>);
}

#define ONNXTRAIN_RECURRENT_LAUNCHERS(T)                                                                \
  template void launch_gru_reset_product<T>(const RecurrentStep<T>&, cudaStream_t);                     \
  template void launch_recurrent_cell<T>(const RecurrentStep<T>&, cudaStream_t);                        \
  template void launch_recurrent_cell_grad<T>(const RecurrentStep<T>&, cudaStream_t);                   \
  template void launch_gru_reset_grad<T>(const RecurrentStep<T>&, cudaStream_t);                        \
  template void launch_recurrent_column_sums<T>(const T*, int64_t, int64_t, int64_t, T*, cudaStream_t); \
  template void launch_peephole_grad<T>(const T*, const T*, const T*, int64_t, int64_t, T*, cudaStream_t);
ONNXTRAIN_RECURRENT_LAUNCHERS(float)
ONNXTRAIN_RECURRENT_LAUNCHERS(double)
#undef ONNXTRAIN_RECURRENT_LAUNCHERS

}  // namespace onnxtrain::cuda
