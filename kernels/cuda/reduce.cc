// "cuda" kernels of ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp and ArgMax/ArgMin over
// float32, float64, int32 and int64: attributes read and checked at prepare exactly as the reference
// reads them (kernels/reference/reduce_axes.h), the reduction planned as a ReduceGeometry, the work
// enqueued by reduce.cu's launchers.
//
// Axes given as a non-empty input (ReduceSum from opset 13, the others from 18) live on the device; their
// values decide the geometry, so run() copies them to the host and waits for that copy: the one host
// synchronisation of these kernels, and only for that form of the op. The plan is rebuilt only when the
// values change.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_entry.h"
#include "kernels/cuda/reduce_launch.h"
#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/reduce_axes.h"

namespace onnxtrain {
namespace {

using namespace reference;
using cuda::ReduceOp;

const std::vector<DType> kReduceDTypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64};

// Calls fn(T{}) for the dtypes of kReduceDTypes.
template <typename Fn>
void dispatch_reduce_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32:
      return fn(float{});
    case DType::Float64:
      return fn(double{});
    case DType::Int32:
      return fn(int32_t{});
    case DType::Int64:
      return fn(int64_t{});
    default:
      throw Error("CUDA reduction: unsupported dtype " + std::string(dtype_name(dtype)));
  }
}

struct CudaReducePlan {
  bool identity = false;  // noop_with_empty_axes with no axes: a copy
  std::vector<int64_t> out_sizes;
  cuda::ReduceGeometry geometry;
};

CudaReducePlan plan_cuda_reduce(const KernelSpec& spec, const std::vector<int64_t>& in_sizes,
                                const std::vector<int64_t>& axes, bool keepdims, bool noop) {
  CudaReducePlan plan;
  const auto rank = static_cast<int64_t>(in_sizes.size());
  if (axes.empty() && noop) {
    plan.identity = true;
    plan.out_sizes = in_sizes;
    return plan;
  }
  const std::vector<bool> reduced = reduced_dims(spec, rank, axes);
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      plan.out_sizes.push_back(in_sizes[d]);
    } else if (keepdims) {
      plan.out_sizes.push_back(1);
    }
  }
  const std::optional<cuda::ReduceGeometry> geometry = cuda::make_reduce_geometry(in_sizes, reduced);
  if (!geometry) {
    kernel_fail(spec, "the CUDA kernel reduces at most " + std::to_string(cuda::kMaxReduceDims) +
                          " alternating groups of kept and reduced dims, got input " + sizes_to_string(in_sizes));
  }
  plan.geometry = *geometry;
  return plan;
}

class CudaReduceKernel final : public Kernel {
 public:
  CudaReduceKernel(KernelSpec spec, ReduceOp op, DType dtype, bool keepdims, bool noop,
                   std::optional<CudaReducePlan> plan)
      : spec_(std::move(spec)),
        op_(op),
        dtype_(dtype),
        keepdims_(keepdims),
        noop_(noop),
        at_run_(!plan),
        plan_(std::move(plan)) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    cuda::DeviceGuard guard(stream);
    cudaStream_t s = cuda::native_stream(stream);
    if (at_run_) replan_for_axes(inputs[1], outputs[0], s);
    const CudaReducePlan& plan = *plan_;
    const TensorView& x = inputs[0];
    const TensorView& y = outputs[0];
    if (plan.identity) {
      const size_t bytes = static_cast<size_t>(x.numel()) * dtype_size(dtype_);
      if (bytes > 0) ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(y.data, x.data, bytes, cudaMemcpyDeviceToDevice, s));
      return;
    }
    dispatch_reduce_dtype(dtype_, [&](auto zero) {
      using T = decltype(zero);
      cuda::launch_reduce<T>(op_, plan.geometry, x.as<const T>(), y.as<T>(), s);
    });
  }

 private:
  // The axes' values, copied to the host (a wait on the stream), and the plan when they changed.
  void replan_for_axes(const TensorView& axes_view, const TensorView& out, cudaStream_t s) {
    std::vector<int64_t> axes(static_cast<size_t>(axes_view.numel()));
    ONNXTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(axes.data(), axes_view.data, axes.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ONNXTRAIN_CUDA_CHECK(cudaStreamSynchronize(s));
    if (plan_ && axes == axes_) return;
    CudaReducePlan plan = plan_cuda_reduce(spec_, spec_.inputs[0].sizes, axes, keepdims_, noop_);
    if (plan.out_sizes != out.sizes) {
      kernel_fail(spec_, "the axes give output sizes " + sizes_to_string(plan.out_sizes) + ", the output has " +
                             sizes_to_string(out.sizes));
    }
    plan_ = std::move(plan);
    axes_ = std::move(axes);
  }

  KernelSpec spec_;
  ReduceOp op_;
  DType dtype_;
  bool keepdims_, noop_, at_run_;
  std::optional<CudaReducePlan> plan_;
  std::vector<int64_t> axes_;  // the run-time axes plan_ was made for
};

template <ReduceOp Op>
std::unique_ptr<Kernel> make_cuda_reduce(const KernelSpec& spec) {
  const ReduceAxes ra = read_reduce_axes(spec, kReduceDTypes);
  std::optional<CudaReducePlan> plan;
  if (!ra.at_run) {
    plan = plan_cuda_reduce(spec, spec.inputs[0].sizes, ra.axes, ra.keepdims, ra.noop);
    require_output(spec, 0, ra.dtype, plan->out_sizes);
  } else {
    require_reduce_output_rank(spec, ra);
  }
  return std::make_unique<CudaReduceKernel>(spec, Op, ra.dtype, ra.keepdims, ra.noop, std::move(plan));
}

template <bool IsMax>
std::unique_ptr<Kernel> make_cuda_arg_reduce(const KernelSpec& spec) {
  const ArgReduceAxis a = read_arg_reduce(spec, kReduceDTypes);
  if (a.n == 0 && a.outer * a.inner > 0) kernel_fail(spec, "cannot take the arg of an empty axis");
  const cuda::AxisGeometry g{a.outer, a.n, a.inner};
  const DType dtype = a.dtype;
  const bool select_last = a.select_last;
  return make_closure_kernel([=](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
    cuda::DeviceGuard guard(stream);
    dispatch_reduce_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      cuda::launch_arg_reduce<T>(IsMax, select_last, g, in[0].as<const T>(), out[0].as<int64_t>(),
                                 cuda::native_stream(stream));
    });
  });
}

KernelEntry cuda_entry(std::string op_type, KernelFactory factory) {
  return cuda::cuda_kernel_entry("", std::move(op_type), kReduceDTypes, factory);
}

}  // namespace

void register_cuda_reduce_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("ReduceSum", &make_cuda_reduce<ReduceOp::Sum>));
  registry.add(cuda_entry("ReduceMean", &make_cuda_reduce<ReduceOp::Mean>));
  registry.add(cuda_entry("ReduceMax", &make_cuda_reduce<ReduceOp::Max>));
  registry.add(cuda_entry("ReduceMin", &make_cuda_reduce<ReduceOp::Min>));
  registry.add(cuda_entry("ReduceProd", &make_cuda_reduce<ReduceOp::Prod>));
  registry.add(cuda_entry("ReduceL1", &make_cuda_reduce<ReduceOp::L1>));
  registry.add(cuda_entry("ReduceL2", &make_cuda_reduce<ReduceOp::L2>));
  registry.add(cuda_entry("ReduceSumSquare", &make_cuda_reduce<ReduceOp::SumSquare>));
  registry.add(cuda_entry("ReduceLogSum", &make_cuda_reduce<ReduceOp::LogSum>));
  registry.add(cuda_entry("ReduceLogSumExp", &make_cuda_reduce<ReduceOp::LogSumExp>));
  registry.add(cuda_entry("ArgMax", &make_cuda_arg_reduce<true>));
  registry.add(cuda_entry("ArgMin", &make_cuda_arg_reduce<false>));
}

}  // namespace onnxtrain
