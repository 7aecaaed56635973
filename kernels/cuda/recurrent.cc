// "cuda" kernels of RNN, GRU, LSTM (opsets 7 and 14) and ai.onnxtrain's RecurrentGrad, float32 and
// float64, checked at prepare by check_recurrent as the reference kernels are (graph/recurrent_cell.h,
// kernels/reference/recurrent*.cc), so both devices refuse the same nodes. Per direction:
//   forward   one cuBLAS product X·Wᵀ for all T·N rows of X (in X's row order, so layout 1 needs no
//             strides), then per step H·Rᵀ into the gates' pre-activations and the cell (recurrent.cu).
//             GRU without linear_before_reset needs r before its h gate's product: the product covers
//             the z and r gates only, then r ⊙ H (a kernel) times Rhᵀ fills the h gate's columns.
//   reserve   the forward's output 3 (training graphs): every direction's tape (RecurrentTape), the
//             per-step gates and states the backward reads, written by the forward's cell kernels in
//             place (reserve_tape), so RecurrentGrad (input 11) need not run the forward again.
//   backward  the tape from the reserve (RecurrentGrad requires it); then from the last step
//             the direction ran back to the first, the cell's gradient (a kernel) and dH += dGh·R (one
//             product per step; GRU's reset-first h gate takes one more). dX, dW, dR, dB and dP read
//             every step's gate gradients at once after the loop: one product or column sum each.
// Products in the element type (float32 under the handle's math mode: TF32 only with --tf32); the
// reference accumulates in double. Every buffer comes from one workspace() block per run.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_common.h"
#include "kernels/cuda/device_error_flag.h"
#include "kernels/cuda/recurrent_launch.h"
#include "kernels/cuda/reduce_loss_plumbing.h"
#include "kernels/reference/recurrent_geometry.h"

namespace onnxtrain {
namespace cuda {
namespace {

using reference::has_view;
using reference::kRecB;
using reference::kRecDY;
using reference::kRecDYc;
using reference::kRecDYh;
using reference::kRecInitialC;
using reference::kRecInitialH;
using reference::kRecLengths;
using reference::kRecPeepholes;
using reference::kRecR;
using reference::kRecReserve;
using reference::kRecReserveOutput;
using reference::kRecW;
using reference::kRecX;
using reference::RecurrentGeometry;

struct BlasOnStream {
  cublasHandle_t handle;
  cudaStream_t stream;
};

// Column-major C = op(A)·op(B) + beta·C. An empty product (k = 0) leaves beta·C: C, or zeros for beta 0.
// A row-major (r, c) buffer is the column-major (c, r) transpose: each product below is named row-major
// in its comment and passed in cuBLAS's terms, C = A·B as Cᵀ = Bᵀ·Aᵀ.
template <typename T>
void recurrent_gemm(const BlasOnStream& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                    int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == T(0)) {
      ONNXTRAIN_CUDA_CHECK(cudaMemset2DAsync(c, static_cast<size_t>(ldc) * sizeof(T), 0,
                                             static_cast<size_t>(m) * sizeof(T), static_cast<size_t>(n), blas.stream));
    }
    return;
  }
  const T one = 1;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  if constexpr (sizeof(T) == 4) {
    ONNXTRAIN_CUBLAS_CHECK(cublasSgemm(blas.handle, op_a, op_b, im, in, ik, &one, a, static_cast<int>(lda), b,
                                       static_cast<int>(ldb), &beta, c, static_cast<int>(ldc)));
  } else {
    ONNXTRAIN_CUBLAS_CHECK(cublasDgemm(blas.handle, op_a, op_b, im, in, ik, &one, a, static_cast<int>(lda), b,
                                       static_cast<int>(ldb), &beta, c, static_cast<int>(ldc)));
  }
}

RecurrentCellType cell_type(const RecurrentGeometry& g) {
  return g.cell.kind == RecurrentCellKind::Rnn   ? RecurrentCellType::Rnn
         : g.cell.kind == RecurrentCellKind::Gru ? RecurrentCellType::Gru
                                                 : RecurrentCellType::Lstm;
}
bool is_lstm(const RecurrentGeometry& g) { return g.cell.kind == RecurrentCellKind::Lstm; }
// GRU without linear_before_reset: its h gate's product reads r ⊙ H, not H.
bool resets_first(const RecurrentGeometry& g) {
  return g.cell.kind == RecurrentCellKind::Gru && !g.cell.linear_before_reset;
}
// The gate columns whose product reads H itself (all but the reset-first h gate).
int64_t gates_reading_h(const RecurrentGeometry& g) { return resets_first(g) ? 2 * g.hidden : g.gated(); }

// X's rows of time t: batch row n is row first_row + n·row_stride (recurrent_launch.h).
int64_t first_row(const RecurrentGeometry& g, int64_t t) { return g.cell.layout == 0 ? t * g.batch : t; }
int64_t row_stride(const RecurrentGeometry& g) { return g.cell.layout == 0 ? 1 : g.steps; }
// Elements between batch rows n and n + 1 of Y (and dY) at one (t, d); of a state tensor at one d.
int64_t y_stride(const RecurrentGeometry& g) {
  return g.cell.layout == 0 ? g.hidden : g.steps * g.cell.directions * g.hidden;
}
int64_t state_stride(const RecurrentGeometry& g) {
  return g.cell.layout == 0 ? g.hidden : g.cell.directions * g.hidden;
}

// Direction d's (N, H) rows of a state tensor (initial_h, dY_h, ...) into a packed (N, H) buffer; zeros
// without the tensor.
template <typename T>
void load_state(const RecurrentGeometry& g, const T* state, int64_t d, T* packed, cudaStream_t stream) {
  const size_t row = static_cast<size_t>(g.hidden) * sizeof(T);
  if (!state) {
    ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(packed, 0, row * static_cast<size_t>(g.batch), stream));
    return;
  }
  ONNXTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(packed, row, state + g.state_row(d, 0), state_stride(g) * sizeof(T), row,
                                         static_cast<size_t>(g.batch), cudaMemcpyDeviceToDevice, stream));
}

// The reverse: a packed (N, H) buffer into direction d's rows of a state tensor (Y_h, d_initial_h, ...).
template <typename T>
void store_state(const RecurrentGeometry& g, const T* packed, int64_t d, T* state, cudaStream_t stream) {
  if (!state) return;
  const size_t row = static_cast<size_t>(g.hidden) * sizeof(T);
  ONNXTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(state + g.state_row(d, 0), state_stride(g) * sizeof(T), packed, row, row,
                                         static_cast<size_t>(g.batch), cudaMemcpyDeviceToDevice, stream));
}

// The device buffers of one run, carved from one workspace() block and reused by every direction (the
// stream orders them). Sizes, with rows = T·N and G·H the gates: xw, dgx, dgh and tape.gates rows × G·H;
// the other tape buffers rows × H; hr N × G·H; h, c, dh, dc, drh N × H. Absent where the cell or the pass
// does not use them: the tape lives in the reserve, and the backward runs no forward at all.
template <typename T>
struct RecurrentBuffers {
  int64_t* lengths = nullptr;
  T *xw = nullptr, *hr = nullptr, *h = nullptr, *c = nullptr;
  RecurrentTape<T> tape;
  T *dgx = nullptr, *dgh = nullptr, *dh = nullptr, *dc = nullptr, *drh = nullptr;
};

template <typename T>
RecurrentBuffers<T> carve_buffers(const Stream& stream, const RecurrentGeometry& g, bool backward) {
  const size_t rows = static_cast<size_t>(g.steps * g.batch), gated = static_cast<size_t>(g.gated());
  const size_t batch = static_cast<size_t>(g.batch), hidden = static_cast<size_t>(g.hidden);
  const bool lstm = is_lstm(g), gru = g.cell.kind == RecurrentCellKind::Gru;
  const bool forward = !backward;
  RecurrentBuffers<T> b;
  ScratchLayout layout;
  const size_t lengths_at = layout.add(batch * sizeof(int64_t));
  std::vector<std::pair<T**, size_t>> pieces;  // (buffer, offset), pointed once the block exists
  auto piece = [&](T*& buffer, bool used, size_t elements) {
    if (used) pieces.emplace_back(&buffer, layout.add(elements * sizeof(T)));
  };
  piece(b.xw, forward, rows * gated);
  piece(b.hr, forward, batch * gated);
  piece(b.h, forward, batch * hidden);
  piece(b.c, forward && lstm, batch * hidden);
  // An inference forward has no reserve, but its h gate reads r ⊙ H (GRU without linear_before_reset).
  piece(b.tape.reset_h, forward && !g.reserve && resets_first(g), rows * hidden);
  piece(b.dgx, backward, rows * gated);
  piece(b.dgh, backward && gru, rows * gated);  // RNN and LSTM: dgh is dgx
  piece(b.dh, backward, batch * hidden);
  piece(b.dc, backward && lstm, batch * hidden);
  piece(b.drh, backward && resets_first(g), batch * hidden);
  char* base = static_cast<char*>(workspace(stream, layout.total()));
  b.lengths = reinterpret_cast<int64_t*>(base + lengths_at);
  for (const auto& [buffer, offset] : pieces) *buffer = reinterpret_cast<T*>(base + offset);
  if (!b.dgh) b.dgh = b.dgx;
  return b;
}

// Direction d's tape in the reserve: rows × G·H gates, then rows × H each of h_prev and LSTM's c_prev, c
// or GRU's one extra (h_linear or reset_h), rows in X's order as every tape buffer (recurrent_launch.h),
// so the products over all rows read it as they read the workspace's tape. The CPU's rows differ
// (cpu_reserve_parts); a node's forward and backward run on one device.
template <typename T>
RecurrentTape<T> reserve_tape(const RecurrentGeometry& g, T* reserve, int64_t d) {
  const int64_t rows = g.steps * g.batch, hs = g.hidden;
  T* at = reserve + d * rows * g.reserve_width();
  RecurrentTape<T> tape;
  tape.gates = at, at += rows * g.gated();
  tape.h_prev = at, at += rows * hs;
  if (is_lstm(g)) {
    tape.c_prev = at, tape.c = at + rows * hs;
  } else if (g.cell.linear_before_reset) {
    tape.h_linear = at;
  } else if (resets_first(g)) {
    tape.reset_h = at;
  }
  return tape;
}

// Direction d's slices of W, R, B and P.
template <typename T>
struct DirectionWeights {
  const T *w = nullptr, *r = nullptr, *wb = nullptr, *rb = nullptr, *p = nullptr;
};

template <typename T>
DirectionWeights<T> direction_weights(const RecurrentGeometry& g, Views in, int64_t d) {
  const int64_t gh = g.gated();
  DirectionWeights<T> w;
  w.w = in[kRecW].as<const T>() + d * gh * g.input;
  w.r = in[kRecR].as<const T>() + d * gh * g.hidden;
  if (g.bias && has_view(in, kRecB)) w.wb = in[kRecB].as<const T>() + d * 2 * gh, w.rb = w.wb + gh;
  if (g.peepholes && has_view(in, kRecPeepholes)) w.p = in[kRecPeepholes].as<const T>() + d * 3 * g.hidden;
  return w;
}

template <typename T>
const T* optional_input(Views in, size_t i, bool used) {
  return used && has_view(in, i) ? in[i].as<const T>() : nullptr;
}

// The fields of a step that stay the same over a direction.
template <typename T>
RecurrentStep<T> direction_step(const RecurrentGeometry& g, const RecurrentBuffers<T>& b,
                                const DirectionWeights<T>& w) {
  RecurrentStep<T> s;
  s.cell = cell_type(g);
  s.linear_before_reset = g.cell.linear_before_reset;
  s.relu = g.cell.relu;
  s.batch = g.batch, s.hidden = g.hidden, s.lengths = b.lengths, s.row_stride = row_stride(g);
  s.xw = b.xw, s.hr = b.hr, s.wb = w.wb, s.rb = w.rb, s.p = w.p, s.h = b.h, s.c = b.c;
  s.y_stride = y_stride(g);
  return s;
}

// Runs direction d: Y's rows of d, Y_h and Y_c (each if given) and the tape's non-null buffers (reset_h
// is always needed where the cell resets first).
template <typename T>
void forward_direction(const BlasOnStream& blas, const RecurrentGeometry& g, Views in, int64_t d,
                       const RecurrentBuffers<T>& b, const RecurrentTape<T>& tape, T* y, T* y_h, T* y_c) {
  const int64_t rows = g.steps * g.batch, hs = g.hidden, gh = g.gated(), stride = row_stride(g);
  const DirectionWeights<T> w = direction_weights<T>(g, in, d);
  // X·Wᵀ: (rows, I)·(I, G·H) into xw, in X's row order.
  recurrent_gemm<T>(blas, true, false, gh, rows, g.input, w.w, g.input, in[kRecX].as<const T>(), g.input, T(0), b.xw,
                    gh);
  load_state<T>(g, optional_input<T>(in, kRecInitialH, g.initial_h), d, b.h, blas.stream);
  if (is_lstm(g)) load_state<T>(g, optional_input<T>(in, kRecInitialC, g.initial_c), d, b.c, blas.stream);
  RecurrentStep<T> step = direction_step(g, b, w);
  step.tape = tape;
  for (int64_t s = 0; s < g.steps; ++s) {
    const int64_t t = g.time_of(d, s);
    step.time = t, step.first_row = first_row(g, t);
    step.y = y ? y + g.y_row(t, d, 0) : nullptr;
    // H·Rᵀ: (N, H)·(H, G'·H) into hr's first G' gate blocks (G' = gates_reading_h), leading dim G·H.
    recurrent_gemm<T>(blas, true, false, gates_reading_h(g), g.batch, hs, w.r, hs, b.h, hs, T(0), b.hr, gh);
    if (resets_first(g)) {
      launch_gru_reset_product<T>(step, blas.stream);
      // (r ⊙ H)·Rhᵀ into hr's h gate block; r ⊙ H's rows of time t are strided like X's.
      recurrent_gemm<T>(blas, true, false, hs, g.batch, hs, w.r + 2 * hs * hs, hs, tape.reset_h + step.first_row * hs,
                        stride * hs, T(0), b.hr + 2 * hs, gh);
    }
    launch_recurrent_cell<T>(step, blas.stream);
  }
  store_state<T>(g, b.h, d, y_h, blas.stream);
  if (is_lstm(g)) store_state<T>(g, b.c, d, y_c, blas.stream);
}

// Direction d of RecurrentGrad: its share of dX (added), its slices of dW, dR, dB, dP and the states'.
template <typename T>
void backward_direction(const BlasOnStream& blas, const RecurrentGeometry& g, Views in, Views out, int64_t d,
                        const RecurrentBuffers<T>& b) {
  // The backward kernels only read the tape, so the (const) reserve input serves as it is.
  const RecurrentTape<T> tape = reserve_tape(g, const_cast<T*>(in[kRecReserve].as<const T>()), d);
  const int64_t rows = g.steps * g.batch, hs = g.hidden, gh = g.gated(), is = g.input, stride = row_stride(g);
  const DirectionWeights<T> w = direction_weights<T>(g, in, d);
  load_state<T>(g, optional_input<T>(in, kRecDYh, true), d, b.dh, blas.stream);
  if (is_lstm(g)) load_state<T>(g, optional_input<T>(in, kRecDYc, true), d, b.dc, blas.stream);
  const T* dy = optional_input<T>(in, kRecDY, true);
  RecurrentStep<T> step = direction_step(g, b, w);
  step.tape = tape;
  step.dh = b.dh, step.dc = b.dc, step.drh = b.drh, step.dgx = b.dgx, step.dgh = b.dgh;
  for (int64_t s = g.steps - 1; s >= 0; --s) {
    const int64_t t = g.time_of(d, s);
    step.time = t, step.first_row = first_row(g, t);
    step.dy = dy ? dy + g.y_row(t, d, 0) : nullptr;
    launch_recurrent_cell_grad<T>(step, blas.stream);
    const int64_t first = step.first_row * gh, ld = stride * gh;  // the step's gradient rows, strided like X's
    if (resets_first(g)) {
      // drh = dGx(h gate)·Rh: (N, H)·(H, H).
      recurrent_gemm<T>(blas, false, false, hs, g.batch, hs, w.r + 2 * hs * hs, hs, b.dgx + first + 2 * hs, ld, T(0),
                        b.drh, hs);
      launch_gru_reset_grad<T>(step, blas.stream);
    }
    // dH_prev += dGh·R over the gates whose product read H: (N, G'·H)·(G'·H, H).
    recurrent_gemm<T>(blas, false, false, hs, g.batch, gates_reading_h(g), w.r, hs, b.dgh + first, ld, T(1), b.dh, hs);
  }
  auto output = [&](size_t i) { return has_view(out, i) ? out[i].as<T>() : nullptr; };
  store_state<T>(g, b.dh, d, output(4), blas.stream);
  if (is_lstm(g)) store_state<T>(g, b.dc, d, output(5), blas.stream);
  // Every step at once; the outputs start zeroed, both directions add into dX.
  if (T* dx = output(0)) {  // dX += dGx·W: (rows, G·H)·(G·H, I)
    recurrent_gemm<T>(blas, false, false, is, rows, gh, w.w, is, b.dgx, gh, T(1), dx, is);
  }
  if (T* dw = output(1)) {  // dW = dGxᵀ·X: (G·H, rows)·(rows, I)
    recurrent_gemm<T>(blas, false, true, is, gh, rows, in[kRecX].as<const T>(), is, b.dgx, gh, T(1), dw + d * gh * is,
                      is);
  }
  if (T* dr = output(2)) {  // dR = dGhᵀ·H_prev, and for the reset-first h gate dGhᵀ·(r ⊙ H_prev)
    dr += d * gh * hs;
    recurrent_gemm<T>(blas, false, true, hs, gates_reading_h(g), rows, tape.h_prev, hs, b.dgh, gh, T(1), dr, hs);
    if (resets_first(g)) {
      recurrent_gemm<T>(blas, false, true, hs, hs, rows, tape.reset_h, hs, b.dgh + 2 * hs, gh, T(1), dr + 2 * hs * hs,
                        hs);
    }
  }
  if (T* db = output(3)) {  // dWb = Σ dGx, dRb = Σ dGh
    launch_recurrent_column_sums<T>(b.dgx, rows, gh, gh, db + d * 2 * gh, blas.stream);
    launch_recurrent_column_sums<T>(b.dgh, rows, gh, gh, db + d * 2 * gh + gh, blas.stream);
  }
  if (T* dp = output(6); dp && is_lstm(g)) {
    launch_peephole_grad<T>(b.dgx, tape.c_prev, tape.c, rows, hs, dp + d * 3 * hs, blas.stream);
  }
}

const char* bad_length_text(int) { return "a sequence_lens value outside 0..T (the sequence's length)"; }

// What a run shares: the checked geometry, the flag of bad sequence_lens (made only when the node has
// them: prepare-time refusals need no GPU) and the spec to name in its Error.
struct RecurrentRun {
  RecurrentGeometry g;
  std::shared_ptr<DeviceErrorFlag> flag;
  KernelSpec spec;

  template <typename T>
  RecurrentBuffers<T> start(Stream& stream, Views in, bool backward) const {
    if (flag) flag->throw_if_raised(spec, bad_length_text);
    RecurrentBuffers<T> b = carve_buffers<T>(stream, g, backward);
    const bool lengths = g.lengths && has_view(in, kRecLengths);
    launch_recurrent_lengths(lengths ? in[kRecLengths].data : nullptr, lengths && in[kRecLengths].dtype == DType::Int64,
                             g.batch, g.steps, b.lengths, flag ? flag->device_ptr() : nullptr, native_stream(stream));
    return b;
  }
};

RecurrentRun prepare_run(const KernelSpec& spec, const RecurrentGeometry& g) {
  // cuBLAS takes ints: every size and leading dimension the products pass (X's rows, strided rows of time t).
  for (int64_t v : {g.batch, g.steps * g.batch, g.steps * g.gated(), g.steps * g.hidden, g.gated(), g.input}) {
    if (!fits_int(v)) reference::kernel_fail(spec, "a size of " + std::to_string(v) + " does not fit cuBLAS's int");
  }
  RecurrentRun run{g, nullptr, spec};
  if (g.lengths) run.flag = std::make_shared<DeviceErrorFlag>();
  return run;
}

std::unique_ptr<Kernel> make_cuda_recurrent(const KernelSpec& spec) {
  const auto checked = reference::check_recurrent(spec, /*backward=*/false);
  const RecurrentRun run = prepare_run(spec, checked.geometry);
  return make_float_launch_kernel(spec, checked.dtype, [run](auto zero, Stream& stream, Views in, Views out) {
    using T = decltype(zero);
    const RecurrentGeometry& g = run.g;
    if (g.batch == 0 || g.hidden == 0) return;  // every output is empty
    const RecurrentBuffers<T> b = run.start<T>(stream, in, /*backward=*/false);
    const BlasOnStream blas{cublas_handle(stream), native_stream(stream)};
    auto output = [&](size_t i) { return has_view(out, i) ? out[i].as<T>() : nullptr; };
    // A reserve keeps the whole tape; without one only what the forward itself reads (reset_h).
    for (int64_t d = 0; d < g.cell.directions; ++d) {
      const RecurrentTape<T> tape = g.reserve ? reserve_tape(g, out[kRecReserveOutput].as<T>(), d) : b.tape;
      forward_direction<T>(blas, g, in, d, b, tape, output(0), output(1), output(2));
    }
  });
}

std::unique_ptr<Kernel> make_cuda_recurrent_grad(const KernelSpec& spec) {
  const auto checked = reference::check_recurrent(spec, /*backward=*/true);
  const RecurrentRun run = prepare_run(spec, checked.geometry);
  return make_float_launch_kernel(spec, checked.dtype, [run](auto zero, Stream& stream, Views in, Views out) {
    using T = decltype(zero);
    const RecurrentGeometry& g = run.g;
    // Zeroed first: dX takes both directions' sums, and a hidden size of 0 leaves dX all zeros.
    for (const TensorView& o : out) {
      if (o.data && o.numel() > 0) {
        ONNXTRAIN_CUDA_CHECK(
            cudaMemsetAsync(o.data, 0, static_cast<size_t>(o.numel()) * sizeof(T), native_stream(stream)));
      }
    }
    if (g.batch == 0 || g.hidden == 0) return;
    const RecurrentBuffers<T> b = run.start<T>(stream, in, /*backward=*/true);
    const BlasOnStream blas{cublas_handle(stream), native_stream(stream)};
    for (int64_t d = 0; d < g.cell.directions; ++d) backward_direction<T>(blas, g, in, out, d, b);
  });
}

}  // namespace
}  // namespace cuda

void register_cuda_recurrent_kernels(KernelRegistry& registry) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    registry.add(cuda::cuda_kernel_entry("", op, reference::kFloatDTypes, &cuda::make_cuda_recurrent));
  }
  registry.add(cuda::cuda_kernel_entry("ai.onnxtrain", "RecurrentGrad", reference::kFloatDTypes,
                                       &cuda::make_cuda_recurrent_grad));
}

}  // namespace onnxtrain
