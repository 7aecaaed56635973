// Reference kernels for ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp and ArgMax/ArgMin.
// Reduce axes are an attribute before opset 13 (ReduceSum) or 18 (the others), an optional int64 input
// from then on (its values are read at run time), where noop_with_empty_axes=1 makes "no axes" the
// identity instead of "all axes". Floats accumulate in double, integers in 64 bits. Empty reductions
// give the ONNX identities (0, 1, -inf for Max, +inf for Min, -inf for LogSumExp).
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/reduce_axes.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// Which output element each input element folds into, for one set of axes.
struct ReducePlan {
  std::vector<int64_t> out_sizes;
  std::vector<std::vector<int64_t>> out_strides;  // over the input's index space; 0 along reduced axes
  int64_t out_numel = 1;
  int64_t count = 1;      // input elements per output element
  bool identity = false;  // noop_with_empty_axes with no axes: a copy
};

ReducePlan plan_reduce(const KernelSpec& spec, const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& axes,
                       bool keepdims, bool noop_with_empty_axes) {
  ReducePlan plan;
  const auto rank = static_cast<int64_t>(in_sizes.size());
  if (axes.empty() && noop_with_empty_axes) {
    plan.identity = true;
    plan.out_sizes = in_sizes;
    return plan;
  }
  const std::vector<bool> reduced = reduced_dims(spec, rank, axes);
  std::vector<int64_t> kept_sizes;  // reduced dims as 1
  for (int64_t d = 0; d < rank; ++d) {
    kept_sizes.push_back(reduced[d] ? 1 : in_sizes[d]);
    if (reduced[d]) plan.count *= in_sizes[d];
    if (!reduced[d] || keepdims) plan.out_sizes.push_back(kept_sizes.back());
    plan.out_numel *= kept_sizes.back();
  }
  plan.out_strides = {broadcast_strides(kept_sizes, in_sizes)};
  return plan;
}

// The value of an empty reduction.
template <typename T, typename Acc>
Acc initial_value(ReduceKind kind) {
  constexpr bool floating = std::is_floating_point_v<Acc>;
  if (kind == ReduceKind::Prod) return 1;
  if (kind == ReduceKind::Max) {
    if constexpr (floating) {
      return -std::numeric_limits<Acc>::infinity();
    } else {
      return static_cast<Acc>(std::numeric_limits<T>::lowest());
    }
  }
  if (kind == ReduceKind::Min) {
    if constexpr (floating) {
      return std::numeric_limits<Acc>::infinity();
    } else {
      return static_cast<Acc>(std::numeric_limits<T>::max());
    }
  }
  return 0;
}

template <typename Acc>
Acc magnitude(Acc v) {
  if constexpr (std::is_unsigned_v<Acc>) {
    return v;
  } else {
    return v < 0 ? -v : v;
  }
}

// Accumulates in Acc (double, int64_t or uint64_t) and writes T.
template <typename T, typename Acc>
void reduce_elements(ReduceKind kind, const ReducePlan& plan, const std::vector<int64_t>& in_sizes, const T* x, T* y) {
  constexpr bool floating = std::is_floating_point_v<Acc>;
  std::vector<Acc> acc(static_cast<size_t>(plan.out_numel), initial_value<T, Acc>(kind));
  std::vector<Acc> shift(static_cast<size_t>(plan.out_numel), 0);  // LogSumExp: each slot's finite max
  if constexpr (floating) {
    if (kind == ReduceKind::LogSumExp) {
      std::vector<Acc> max(shift.size(), -std::numeric_limits<Acc>::infinity());
      for_each_broadcast(in_sizes, plan.out_strides, [&](int64_t i, const std::vector<int64_t>& slot) {
        max[slot[0]] = std::max(max[slot[0]], static_cast<Acc>(x[i]));
      });
      for (size_t k = 0; k < max.size(); ++k) shift[k] = std::isfinite(max[k]) ? max[k] : 0;
    }
  }
  for_each_broadcast(in_sizes, plan.out_strides, [&](int64_t i, const std::vector<int64_t>& slot) {
    Acc& a = acc[slot[0]];
    const auto v = static_cast<Acc>(x[i]);
    switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
      case ReduceKind::LogSum:
        a += v;
        break;
      case ReduceKind::Prod:
        a *= v;
        break;
      case ReduceKind::L1:
        a += magnitude(v);
        break;
      case ReduceKind::L2:
      case ReduceKind::SumSquare:
        a += v * v;
        break;
      case ReduceKind::Max:
      case ReduceKind::Min: {
        const bool better = kind == ReduceKind::Max ? v > a : v < a;
        bool nan = false;
        if constexpr (floating) nan = std::isnan(v);
        if (better || nan) a = v;  // NaN propagates, like numpy
        break;
      }
      case ReduceKind::LogSumExp:
        if constexpr (floating) a += std::exp(v - shift[slot[0]]);
        break;
    }
  });
  for (size_t k = 0; k < acc.size(); ++k) {
    Acc r = acc[k];
    if constexpr (floating) {
      if (kind == ReduceKind::Mean) r /= static_cast<Acc>(plan.count);
      if (kind == ReduceKind::L2) r = std::sqrt(r);
      if (kind == ReduceKind::LogSum) r = std::log(r);
      if (kind == ReduceKind::LogSumExp) r = shift[k] + std::log(r);
      if constexpr (std::is_integral_v<T>) {
        y[k] = float_to_integer<T>(r);
      } else {
        y[k] = static_cast<T>(r);
      }
    } else {
      if (kind == ReduceKind::Mean) r = plan.count == 0 ? 0 : r / static_cast<Acc>(plan.count);
      y[k] = static_cast<T>(r);
    }
  }
}

template <typename T>
void reduce_typed(ReduceKind kind, const ReducePlan& plan, const std::vector<int64_t>& in_sizes, const T* x, T* y) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const bool needs_float_math = kind == ReduceKind::L2 || kind == ReduceKind::LogSum || kind == ReduceKind::LogSumExp;
  if constexpr (std::is_floating_point_v<T>) {
    reduce_elements<T, double>(kind, plan, in_sizes, x, y);
  } else if (needs_float_math) {
    reduce_elements<T, double>(kind, plan, in_sizes, x, y);
  } else {
    reduce_elements<T, Wide>(kind, plan, in_sizes, x, y);
  }
}

template <ReduceKind Kind>
std::unique_ptr<Kernel> make_reduce(const KernelSpec& spec) {
  const ReduceAxes ra = read_reduce_axes(spec, kArithmeticDTypes);
  const DType dtype = ra.dtype;
  const bool keepdims = ra.keepdims, noop = ra.noop;
  const std::vector<int64_t> in_sizes = spec.inputs[0].sizes;
  std::optional<ReducePlan> fixed_plan;
  if (!ra.at_run) {
    fixed_plan = plan_reduce(spec, in_sizes, ra.axes, keepdims, noop);
    require_output(spec, 0, dtype, fixed_plan->out_sizes);
  } else {
    require_reduce_output_rank(spec, ra);
  }
  return make_closure_kernel([spec, dtype, in_sizes, keepdims, noop, fixed_plan](auto inputs, auto outputs) {
    ReducePlan plan;
    if (fixed_plan) {
      plan = *fixed_plan;
    } else {
      const auto* values = inputs[1].template as<int64_t>();
      plan = plan_reduce(spec, in_sizes, std::vector<int64_t>(values, values + inputs[1].numel()), keepdims, noop);
      if (plan.out_sizes != outputs[0].sizes) {
        kernel_fail(spec, "the axes give output sizes " + sizes_to_string(plan.out_sizes) + ", the output has " +
                              sizes_to_string(outputs[0].sizes));
      }
    }
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* x = inputs[0].template as<T>();
      T* y = outputs[0].template as<T>();
      if (plan.identity) {
        std::copy(x, x + inputs[0].numel(), y);
      } else {
        reduce_typed<T>(Kind, plan, in_sizes, x, y);
      }
    });
  });
}

// ArgMax/ArgMin along one axis; int64 indices; ties pick the first index unless select_last_index=1.
template <bool IsMax>
std::unique_ptr<Kernel> make_arg_reduce(const KernelSpec& spec) {
  const ArgReduceAxis a = read_arg_reduce(spec, kArithmeticDTypes);
  const DType dtype = a.dtype;
  const int64_t outer = a.outer, inner = a.inner, n = a.n;
  const bool select_last = a.select_last;
  if (n == 0 && outer * inner > 0) kernel_fail(spec, "cannot take the arg of an empty axis");
  return make_closure_kernel([dtype, outer, inner, n, select_last](auto inputs, auto outputs) {
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* x = inputs[0].template as<T>();
      auto* y = outputs[0].template as<int64_t>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* line = x + o * n * inner + i;
          int64_t best = 0;
          for (int64_t k = 1; k < n; ++k) {
            const T v = line[k * inner], b = line[best * inner];
            const bool better = IsMax ? v > b : v < b;
            if (better || (select_last && v == b)) best = k;
          }
          y[o * inner + i] = best;
        }
      }
    });
  });
}

}  // namespace

void register_reference_reduce_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("ReduceSum", kArithmeticDTypes, &make_reduce<ReduceKind::Sum>));
  registry.add(reference_entry("ReduceMean", kArithmeticDTypes, &make_reduce<ReduceKind::Mean>));
  registry.add(reference_entry("ReduceMax", kArithmeticDTypes, &make_reduce<ReduceKind::Max>));
  registry.add(reference_entry("ReduceMin", kArithmeticDTypes, &make_reduce<ReduceKind::Min>));
  registry.add(reference_entry("ReduceProd", kArithmeticDTypes, &make_reduce<ReduceKind::Prod>));
  registry.add(reference_entry("ReduceL1", kArithmeticDTypes, &make_reduce<ReduceKind::L1>));
  registry.add(reference_entry("ReduceL2", kArithmeticDTypes, &make_reduce<ReduceKind::L2>));
  registry.add(reference_entry("ReduceSumSquare", kArithmeticDTypes, &make_reduce<ReduceKind::SumSquare>));
  registry.add(reference_entry("ReduceLogSum", kArithmeticDTypes, &make_reduce<ReduceKind::LogSum>));
  registry.add(reference_entry("ReduceLogSumExp", kArithmeticDTypes, &make_reduce<ReduceKind::LogSumExp>));
  registry.add(reference_entry("ArgMax", kArithmeticDTypes, &make_arg_reduce<true>));
  registry.add(reference_entry("ArgMin", kArithmeticDTypes, &make_arg_reduce<false>));
}

}  // namespace onnxtrain
