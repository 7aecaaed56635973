// "cpu" kernels of ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, float32. At plan time the
// input is collapsed into alternating groups of kept and reduced dims (size-1 dims dropped, neighbours of
// the same kind merged), which leaves two loop shapes:
//   inner reduced  (…, K, R): each output reduces contiguous rows: SIMD lanes along the row. Reducing
//                   only the trailing dims with Sum/Mean is oneDNN's jit `reduction` primitive.
//   inner kept     (…, R, K): each output row accumulates whole input rows vertically, SIMD along the
//                   row: the (N, C) → (C) bias gradient. (N, C, H, W) over (0, 2, 3) is (R, K, R): inner
//                   reduced, N rows of H·W per channel.
// Threads split the outputs, or, when there are too few outputs, the reduced range (per-thread partials
// combined in a fixed order). Sums accumulate in SIMD float lanes over short blocks whose results are
// combined in double, so long reductions stay within float rounding of the double-accumulating reference;
// products and L2 accumulate in double lanes.
// LogSumExp takes the max first and sums exp(x - max) with a vectorised exp. Axes given as an input are
// read at run time; the plan is rebuilt only when their values change. Zero-size inputs go to the
// reference kernel.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_clones.h"
#include "kernels/onednn/primitive_kernel.h"
#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/reduce_axes.h"

namespace onnxtrain {
namespace {

using namespace reference;
using cpu::parallel_for;

// exp(x) for x <= 0 (x - max in LogSumExp) within 1e-7 relative, in plain arithmetic the compiler
// vectorises (no float compares or conversions, which -ftrapping-math keeps out of SIMD selects): x is
// clamped at -87.3 on its bits (e^x there is 1.2e-38, nothing beside the e^0 of the max), x = n·ln2 + r
// with n from the mantissa of x·log2(e) + 1.5·2^23, e^r by Cephes' degree-6 polynomial, 2^n built in the
// exponent bits.
inline float exp_nonpositive(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  constexpr uint32_t kLow = 0xC2AE999Au;  // -87.3f; as unsigned, more negative floats are larger
  const float xc = std::bit_cast<float>(bits > kLow ? kLow : bits);
  const float biased = xc * 1.44269504088896341f + 12582912.0f;
  const float fn = biased - 12582912.0f;
  const float r = (xc - fn * 0.693359375f) + fn * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t n = std::bit_cast<int32_t>(biased) - 0x4B400000;  // in [-126, 0]
  return p * std::bit_cast<float>((n + 127) << 23);
}

enum class Kind { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// --- the folds: map an element, combine in Lane lanes, combine block results in Acc ---
// Products and L2's squares fold in double lanes: a float product of a block overflows or underflows
// where the whole product may not, and squares below 1e-19 vanish in float where their root does not.
struct SumFold {
  using Lane = float;
  using Acc = double;
  static constexpr Lane kInit = 0;
  static Lane map(float x, float) { return x; }
  static Lane combine(Lane a, Lane b) { return a + b; }
  static Acc combine_acc(Acc a, Acc b) { return a + b; }
};
struct AbsSumFold : SumFold {
  static Lane map(float x, float) { return std::fabs(x); }
};
struct SquareSumFold : SumFold {
  static Lane map(float x, float) { return x * x; }
};
struct ExpSumFold : SumFold {
  static Lane map(float x, float shift) { return exp_nonpositive(x - shift); }
};
struct WideSquareSumFold {
  using Lane = double;
  using Acc = double;
  static constexpr Lane kInit = 0;
  static Lane map(float x, float) { return static_cast<double>(x) * static_cast<double>(x); }
  static Lane combine(Lane a, Lane b) { return a + b; }
  static Acc combine_acc(Acc a, Acc b) { return a + b; }
};
struct ProdFold {
  using Lane = double;
  using Acc = double;
  static constexpr Lane kInit = 1;
  static Lane map(float x, float) { return x; }
  static Lane combine(Lane a, Lane b) { return a * b; }
  static Acc combine_acc(Acc a, Acc b) { return a * b; }
};
// NaN propagates (numpy, and the reference): a NaN accumulator stays, a NaN element replaces it.
struct MaxFold {
  using Lane = float;
  using Acc = float;
  static constexpr Lane kInit = -std::numeric_limits<float>::infinity();
  static Lane map(float x, float) { return x; }
  static Lane combine(Lane a, Lane b) { return ((b > a) | (b != b)) ? b : a; }
  static Acc combine_acc(Acc a, Acc b) { return combine(a, b); }
};
struct MinFold {
  using Lane = float;
  using Acc = float;
  static constexpr Lane kInit = std::numeric_limits<float>::infinity();
  static Lane map(float x, float) { return x; }
  static Lane combine(Lane a, Lane b) { return ((b < a) | (b != b)) ? b : a; }
  static Acc combine_acc(Acc a, Acc b) { return combine(a, b); }
};

constexpr int64_t kMaxRank = 64;       // beyond: the reference kernel
constexpr int kLanes = 16;             // float lanes of a row reduction (4 SSE / 2 AVX / 1 AVX-512 registers)
constexpr int64_t kBlock = 2048;       // elements folded in float before the block result goes into Acc
constexpr int64_t kTile = 1024;        // columns of an inner-kept tile (whole rows up to this: streaming reads)
constexpr int64_t kRowsPerFlush = 64;  // rows an inner-kept tile folds in float before flushing into Acc

// Folds x[0, n) (contiguous) into an Acc.
template <typename F>
ONNXTRAIN_REDUCE_CLONES typename F::Acc fold_row(const float* x, int64_t n, float shift) {
  typename F::Acc acc = F::kInit;
  int64_t i = 0;
  while (i < n) {
    const int64_t block_end = std::min(n, i + kBlock);
    typename F::Lane lanes[kLanes];
    for (int j = 0; j < kLanes; ++j) lanes[j] = F::kInit;
    for (; i + kLanes <= block_end; i += kLanes) {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) lanes[j] = F::combine(lanes[j], F::map(x[i + j], shift));
    }
    typename F::Lane s = F::kInit;
    for (int j = 0; j < kLanes; ++j) s = F::combine(s, lanes[j]);
    for (; i < block_end; ++i) s = F::combine(s, F::map(x[i], shift));
    acc = F::combine_acc(acc, static_cast<typename F::Acc>(s));
  }
  return acc;
}

struct Group {
  int64_t size = 1, stride = 1;  // stride in input elements
};

// The collapsed loop nest of one set of axes.
struct Plan {
  bool identity = false;  // noop_with_empty_axes with no axes: a copy
  std::vector<int64_t> out_sizes;
  int64_t numel = 1, out_numel = 1, count = 1;
  bool inner_reduced = true;
  int64_t inner = 1;               // length of the innermost (contiguous) group
  std::vector<Group> kept;         // the kept groups other than the inner one, outermost first
  std::vector<Group> reduced;      // the reduced groups other than the inner one, outermost first
  std::vector<int64_t> offsets;    // input offset of every combination of `reduced` (when 2 or more)
  int64_t rows = 1;                // combinations of `reduced`
  std::vector<float> shift;        // LogSumExp: the per-output max, out_numel
  std::vector<double> partials;    // per-thread partial results when threads split the reduced range
  std::unique_ptr<Kernel> onednn;  // oneDNN's reduction for trailing-axes Sum/Mean

  int64_t row_offset(int64_t r) const {
    if (reduced.empty()) return 0;
    return reduced.size() == 1 ? r * reduced[0].stride : offsets[r];
  }
};

std::unique_ptr<Kernel> make_onednn_reduction(const KernelSpec& spec, Kind kind, int64_t outer, int64_t inner) {
  const dnnl::algorithm alg = kind == Kind::Sum ? dnnl::algorithm::reduction_sum : dnnl::algorithm::reduction_mean;
  return onednn::checked(spec, "reduction", [&]() -> std::unique_ptr<Kernel> {
    const dnnl::memory::desc src = onednn::plain_desc({outer, inner});
    const dnnl::memory::desc dst = onednn::plain_desc({outer, 1});
    dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(alg, src, dst, 0.f, 0.f), onednn::user_scratchpad_attr(),
                                       onednn::cpu_engine());
    // Only the jit implementation is fast; oneDNN's "ref" one is slower than our loops.
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    auto kernel = std::make_unique<onednn::PrimitiveKernel>(spec, pd, dnnl::reduction(pd));
    kernel->bind_input(DNNL_ARG_SRC, 0, src);
    kernel->bind_output(DNNL_ARG_DST, 0, dst);
    return kernel;
  });
}

Plan make_plan(const KernelSpec& spec, Kind kind, const std::vector<int64_t>& in_sizes,
               const std::vector<int64_t>& axes, bool keepdims, bool noop) {
  Plan plan;
  const auto rank = static_cast<int64_t>(in_sizes.size());
  for (int64_t s : in_sizes) plan.numel *= s;
  if (axes.empty() && noop) {
    plan.identity = true;
    plan.out_sizes = in_sizes;
    plan.out_numel = plan.numel;
    return plan;
  }
  const std::vector<bool> is_reduced = reduced_dims(spec, rank, axes);
  // Groups, outermost first: size-1 dims dropped, neighbours of the same kind merged.
  struct Run {
    Group g;
    bool reduced;
  };
  std::vector<Run> runs;
  int64_t stride = 1;
  std::vector<int64_t> strides(in_sizes.size());
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= in_sizes[d];
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (is_reduced[d]) plan.count *= in_sizes[d];
    if (!is_reduced[d] || keepdims) plan.out_sizes.push_back(is_reduced[d] ? 1 : in_sizes[d]);
    if (!is_reduced[d]) plan.out_numel *= in_sizes[d];
    if (in_sizes[d] == 1) continue;
    if (!runs.empty() && runs.back().reduced == is_reduced[d]) {
      runs.back().g.size *= in_sizes[d];
      runs.back().g.stride = strides[d];
    } else {
      runs.push_back({{in_sizes[d], strides[d]}, is_reduced[d]});
    }
  }
  if (runs.empty()) runs.push_back({{1, 1}, true});
  plan.inner_reduced = runs.back().reduced;
  plan.inner = runs.back().g.size;
  for (size_t i = 0; i + 1 < runs.size(); ++i) (runs[i].reduced ? plan.reduced : plan.kept).push_back(runs[i].g);
  for (const Group& g : plan.reduced) plan.rows *= g.size;
  if (plan.reduced.size() > 1) {
    plan.offsets.assign(static_cast<size_t>(plan.rows), 0);
    std::vector<int64_t> index(plan.reduced.size(), 0);
    int64_t offset = 0;
    for (int64_t r = 0; r < plan.rows; ++r) {
      plan.offsets[r] = offset;
      for (auto d = static_cast<int64_t>(plan.reduced.size()) - 1; d >= 0; --d) {
        offset += plan.reduced[d].stride;
        if (++index[d] < plan.reduced[d].size) break;
        offset -= plan.reduced[d].stride * plan.reduced[d].size;
        index[d] = 0;
      }
    }
  }
  if (kind == Kind::LogSumExp) plan.shift.assign(static_cast<size_t>(plan.out_numel), 0.0f);
  if (!plan.inner_reduced) plan.partials.assign(static_cast<size_t>(omp_get_max_threads() * kTile), 0.0);
  const bool trailing = plan.inner_reduced && plan.reduced.empty();
  // oneDNN's jit reduction splits the outputs across threads, not one output's range (reduce-all).
  if (trailing && plan.inner >= 128 && plan.out_numel >= omp_get_max_threads() &&
      (kind == Kind::Sum || kind == Kind::Mean)) {
    plan.onednn = make_onednn_reduction(spec, kind, plan.out_numel, plan.inner);
  }
  return plan;
}

// Writes output k from its accumulated value.
inline float finish(Kind kind, double acc, int64_t count, float shift) {
  switch (kind) {
    case Kind::Mean:
      return static_cast<float>(acc / static_cast<double>(count));
    case Kind::L2:
      return static_cast<float>(std::sqrt(acc));
    case Kind::LogSum:
      return static_cast<float>(std::log(acc));
    case Kind::LogSumExp:
      return static_cast<float>(static_cast<double>(shift) + std::log(acc));
    default:
      return static_cast<float>(acc);
  }
}

// Inner reduced: output o folds plan.rows rows of plan.inner contiguous elements. `store(o, acc)`.
template <typename F, typename Store>
void reduce_inner_reduced(const Plan& plan, const float* x, const float* shift, Store store) {
  const int64_t work = plan.rows * plan.inner;  // per output
  const int64_t threads = omp_get_max_threads();
  // Folds the reduced range [begin, end) (over rows × inner) of the output whose first input is x0.
  auto fold_range = [&](const float* x0, int64_t begin, int64_t end, float s) {
    typename F::Acc acc = F::kInit;
    int64_t r = begin / plan.inner, c = begin % plan.inner;
    while (begin < end) {
      const int64_t len = std::min(plan.inner - c, end - begin);
      acc = F::combine_acc(acc, fold_row<F>(x0 + plan.row_offset(r) + c, len, s));
      begin += len;
      ++r;
      c = 0;
    }
    return acc;
  };
  if (plan.out_numel >= threads || work < 32768) {
    parallel_for(plan.out_numel, 32768 / work + 1, [&](int64_t begin, int64_t end) {
      int64_t index[kMaxRank];  // odometer over the kept groups
      int64_t base = 0, rest = begin;
      for (auto d = static_cast<int64_t>(plan.kept.size()) - 1; d >= 0; --d) {
        index[d] = rest % plan.kept[d].size;
        rest /= plan.kept[d].size;
        base += index[d] * plan.kept[d].stride;
      }
      for (int64_t o = begin; o < end; ++o) {
        store(o, fold_range(x + base, 0, work, shift ? shift[o] : 0.0f));
        for (auto d = static_cast<int64_t>(plan.kept.size()) - 1; d >= 0; --d) {
          base += plan.kept[d].stride;
          if (++index[d] < plan.kept[d].size) break;
          base -= plan.kept[d].stride * plan.kept[d].size;
          index[d] = 0;
        }
      }
    });
    return;
  }
  // Few outputs, long reductions: the threads split each output's reduced range.
  for (int64_t o = 0; o < plan.out_numel; ++o) {
    int64_t base = 0, rest = o;
    for (auto d = static_cast<int64_t>(plan.kept.size()) - 1; d >= 0; --d) {
      base += (rest % plan.kept[d].size) * plan.kept[d].stride;
      rest /= plan.kept[d].size;
    }
    const float s = shift ? shift[o] : 0.0f;
    typename F::Acc parts[256];
    const int64_t chunks = std::min<int64_t>(threads, 256);
    for (int64_t t = 0; t < chunks; ++t) parts[t] = F::kInit;
    parallel_for(chunks, 1, [&](int64_t tb, int64_t te) {
      for (int64_t t = tb; t < te; ++t) parts[t] = fold_range(x + base, work * t / chunks, work * (t + 1) / chunks, s);
    });
    typename F::Acc acc = F::kInit;
    for (int64_t t = 0; t < chunks; ++t) acc = F::combine_acc(acc, parts[t]);
    store(o, acc);
  }
}

// Inner kept: output row p (plan.inner contiguous outputs) folds plan.rows input rows vertically.
// Folds rows [r0, r1) of columns [j0, j0 + n) of the output row whose first input is x0 into acc[0, n).
template <typename F>
ONNXTRAIN_REDUCE_CLONES void fold_tile(const Plan& plan, const float* x0, int64_t r0, int64_t r1, int64_t n,
                                       const float* shift, typename F::Acc* acc) {
  typename F::Lane lanes[kTile];
  for (int64_t j = 0; j < n; ++j) acc[j] = F::kInit;
  for (int64_t r = r0; r < r1;) {
    const int64_t flush = std::min(r1, r + kRowsPerFlush);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) lanes[j] = F::kInit;
    for (; r < flush; ++r) {
      const float* row = x0 + plan.row_offset(r);
      if (shift) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) lanes[j] = F::combine(lanes[j], F::map(row[j], shift[j]));
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) lanes[j] = F::combine(lanes[j], F::map(row[j], 0.0f));
      }
    }
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] = F::combine_acc(acc[j], static_cast<typename F::Acc>(lanes[j]));
  }
}

template <typename F, typename Store>
void reduce_inner_kept(Plan& plan, const float* x, const float* shift, Store store) {
  const int64_t tiles_per_row = (plan.inner + kTile - 1) / kTile;
  const int64_t out_rows = plan.out_numel / plan.inner;
  const int64_t tasks = out_rows * tiles_per_row;
  const int64_t threads = omp_get_max_threads();
  auto row_base = [&](int64_t p) {
    int64_t base = 0;
    for (auto d = static_cast<int64_t>(plan.kept.size()) - 1; d >= 0; --d) {
      base += (p % plan.kept[d].size) * plan.kept[d].stride;
      p /= plan.kept[d].size;
    }
    return base;
  };
  const int64_t work_per_task = plan.rows * std::min(plan.inner, kTile);
  if (tasks >= threads || plan.rows < 4 * threads) {
    parallel_for(tasks, 32768 / work_per_task + 1, [&](int64_t begin, int64_t end) {
      typename F::Acc acc[kTile];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t p = t / tiles_per_row, j0 = (t % tiles_per_row) * kTile;
        const int64_t n = std::min(kTile, plan.inner - j0);
        const int64_t o0 = p * plan.inner + j0;
        fold_tile<F>(plan, x + row_base(p) + j0, 0, plan.rows, n, shift ? shift + o0 : nullptr, acc);
        for (int64_t j = 0; j < n; ++j) store(o0 + j, acc[j]);
      }
    });
    return;
  }
  // Few output columns, many rows (the (N, C) → (C) bias gradient): the threads split the rows.
  const int64_t chunks = std::min<int64_t>(threads, static_cast<int64_t>(plan.partials.size()) / kTile);
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t p = t / tiles_per_row, j0 = (t % tiles_per_row) * kTile;
    const int64_t n = std::min(kTile, plan.inner - j0);
    const int64_t o0 = p * plan.inner + j0;
    const float* x0 = x + row_base(p) + j0;
    auto* parts = reinterpret_cast<typename F::Acc*>(plan.partials.data());
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        fold_tile<F>(plan, x0, plan.rows * c / chunks, plan.rows * (c + 1) / chunks, n, shift ? shift + o0 : nullptr,
                     parts + c * kTile);
      }
    });
    for (int64_t j = 0; j < n; ++j) {
      typename F::Acc acc = parts[j];
      for (int64_t c = 1; c < chunks; ++c) acc = F::combine_acc(acc, parts[c * kTile + j]);
      store(o0 + j, acc);
    }
  }
}

template <typename F, typename Store>
void reduce_with(Plan& plan, const float* x, const float* shift, Store store) {
  if (plan.inner_reduced) {
    reduce_inner_reduced<F>(plan, x, shift, store);
  } else {
    reduce_inner_kept<F>(plan, x, shift, store);
  }
}

void run_plan(Kind kind, Plan& plan, const float* x, float* y) {
  if (plan.identity) {
    std::memcpy(y, x, static_cast<size_t>(plan.numel) * sizeof(float));
    return;
  }
  const int64_t count = plan.count;
  auto store = [&](int64_t o, double acc) { y[o] = finish(kind, acc, count, 0.0f); };
  switch (kind) {
    case Kind::Sum:
    case Kind::Mean:
    case Kind::LogSum:
      return reduce_with<SumFold>(plan, x, nullptr, store);
    case Kind::Prod:
      return reduce_with<ProdFold>(plan, x, nullptr, store);
    case Kind::L1:
      return reduce_with<AbsSumFold>(plan, x, nullptr, store);
    case Kind::L2:
      return reduce_with<WideSquareSumFold>(plan, x, nullptr, store);
    case Kind::SumSquare:
      return reduce_with<SquareSumFold>(plan, x, nullptr, store);
    case Kind::Max:
      return reduce_with<MaxFold>(plan, x, nullptr, [&](int64_t o, float acc) { y[o] = acc; });
    case Kind::Min:
      return reduce_with<MinFold>(plan, x, nullptr, [&](int64_t o, float acc) { y[o] = acc; });
    case Kind::LogSumExp: {
      // With a finite max, x - max <= 0. A NaN, +inf or -inf max is also the reference's answer (its
      // shift 0 sums a NaN, an e^inf, or only zeros), and the sum beside it is not used.
      float* shift = plan.shift.data();
      reduce_with<MaxFold>(plan, x, nullptr, [&](int64_t o, float m) { shift[o] = m; });
      return reduce_with<ExpSumFold>(plan, x, shift, [&](int64_t o, double acc) {
        y[o] = std::isfinite(shift[o]) ? finish(kind, acc, count, shift[o]) : shift[o];
      });
    }
  }
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const KernelSpec& spec, Kind kind, bool keepdims, bool noop, std::optional<Plan> plan)
      : spec_(spec), kind_(kind), keepdims_(keepdims), noop_(noop), axes_at_run_(!plan), plan_(std::move(plan)) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (axes_at_run_ && (!plan_ || !same_axes(inputs[1]))) {
      const auto* values = inputs[1].as<int64_t>();
      axes_.assign(values, values + inputs[1].numel());
      plan_.reset();
      plan_ = make_plan(spec_, kind_, spec_.inputs[0].sizes, axes_, keepdims_, noop_);
      if (plan_->out_sizes != outputs[0].sizes) {
        const std::vector<int64_t> got = plan_->out_sizes;
        plan_.reset();
        kernel_fail(spec_, "the axes give output sizes " + sizes_to_string(got) + ", the output has " +
                               sizes_to_string(outputs[0].sizes));
      }
    }
    if (plan_->onednn) return plan_->onednn->run(stream, inputs.first(1), outputs);
    run_plan(kind_, *plan_, inputs[0].as<float>(), outputs[0].as<float>());
  }

 private:
  bool same_axes(const TensorView& axes) const {
    const auto* values = axes.as<int64_t>();
    return static_cast<size_t>(axes.numel()) == axes_.size() && std::equal(axes_.begin(), axes_.end(), values);
  }

  KernelSpec spec_;
  Kind kind_;
  bool keepdims_, noop_, axes_at_run_;
  std::vector<int64_t> axes_;  // the run-time axes the plan was made for
  std::optional<Plan> plan_;
};

template <Kind K>
std::unique_ptr<Kernel> make_reduce(const KernelSpec& spec) {
  const ReduceAxes ra = read_reduce_axes(spec, {DType::Float32});
  const bool keepdims = ra.keepdims, noop = ra.noop;
  const std::vector<int64_t>& in_sizes = spec.inputs[0].sizes;
  if (spec.inputs[0].numel() == 0 || static_cast<int64_t>(in_sizes.size()) > kMaxRank)
    return onednn::reference_kernel(spec);
  std::optional<Plan> plan;
  if (!ra.at_run) {
    plan = make_plan(spec, K, in_sizes, ra.axes, keepdims, noop);
    require_output(spec, 0, DType::Float32, plan->out_sizes);
  } else {
    require_reduce_output_rank(spec, ra);
  }
  return std::make_unique<ReduceKernel>(spec, K, keepdims, noop, std::move(plan));
}

}  // namespace

void register_cpu_reduce_kernels(KernelRegistry& registry) {
  using cpu::cpu_entry;
  registry.add(cpu_entry("ReduceSum", {DType::Float32}, &make_reduce<Kind::Sum>));
  registry.add(cpu_entry("ReduceMean", {DType::Float32}, &make_reduce<Kind::Mean>));
  registry.add(cpu_entry("ReduceMax", {DType::Float32}, &make_reduce<Kind::Max>));
  registry.add(cpu_entry("ReduceMin", {DType::Float32}, &make_reduce<Kind::Min>));
  registry.add(cpu_entry("ReduceProd", {DType::Float32}, &make_reduce<Kind::Prod>));
  registry.add(cpu_entry("ReduceL1", {DType::Float32}, &make_reduce<Kind::L1>));
  registry.add(cpu_entry("ReduceL2", {DType::Float32}, &make_reduce<Kind::L2>));
  registry.add(cpu_entry("ReduceSumSquare", {DType::Float32}, &make_reduce<Kind::SumSquare>));
  registry.add(cpu_entry("ReduceLogSum", {DType::Float32}, &make_reduce<Kind::LogSum>));
  registry.add(cpu_entry("ReduceLogSumExp", {DType::Float32}, &make_reduce<Kind::LogSumExp>));
}

}  // namespace onnxtrain
