// The kernel shape shared by the oneDNN pooling, batch norm, eltwise, softmax, LRN and layer norm
// kernels: one primitive built at prepare time with a user scratchpad, memory objects created once over
// no buffer and pointed at the caller's buffers (or kernel-owned ones) on every run, and an optional
// finishing step on the host (running statistics, 1/sqrt(var+eps)). Also the reference fallback that a
// factory returns for a configuration no primitive expresses exactly (same device: not a device fallback).
//
//   auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::eltwise_forward(pd));
//   kernel->bind_input(DNNL_ARG_SRC, 0, flat);
//   kernel->bind_output(DNNL_ARG_DST, 0, flat);
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {

// The attributes every primitive here is created with: a user scratchpad (in the running thread's arena).
inline dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Whether every present input and output of spec is float32 and non-empty (what the primitives take).
inline bool all_float32_nonempty(const KernelSpec& spec) {
  for (const auto* list : {&spec.inputs, &spec.outputs}) {
    for (const TensorDesc& d : *list) {
      if (!d.present()) continue;
      if (d.dtype != DType::Float32 || d.numel() == 0) return false;
    }
  }
  return true;
}

class PrimitiveKernel final : public Kernel {
 public:
  using Finish = std::function<void(std::span<const TensorView>, std::span<const TensorView>)>;

  PrimitiveKernel(const KernelSpec& spec, const dnnl::primitive_desc& pd, dnnl::primitive primitive)
      : spec_(spec), primitive_(std::move(primitive)) {
    args_[DNNL_ARG_SCRATCHPAD] = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), nullptr);
  }

  void bind_input(int arg, size_t index, const dnnl::memory::desc& desc) { bind(arg, index, false, desc); }
  void bind_output(int arg, size_t index, const dnnl::memory::desc& desc) { bind(arg, index, true, desc); }
  // A buffer of the kernel for `arg` (statistics the op does not output as they are); returns its data.
  float* own(int arg, const dnnl::memory::desc& desc) {
    owned_.emplace_back(desc.get_size() / sizeof(float) + 1);
    args_[arg] = dnnl::memory(desc, cpu_engine(), owned_.back().data());
    return owned_.back().data();
  }
  void set_finish(Finish finish) { finish_ = std::move(finish); }
  // Called after the run where the stream keeps derived values (Stream::derived), as the sequence kernel's.
  using Keep = std::function<void(Stream&, std::span<const TensorView> inputs)>;
  void set_keep(Keep keep) { keep_ = std::move(keep); }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    ScratchArena::Lease lease;
    dnnl::memory& scratchpad = args_[DNNL_ARG_SCRATCHPAD];
    scratchpad.set_data_handle(lease.take(scratchpad.get_desc().get_size()));
    for (Binding& b : bindings_) {
      std::span<const TensorView> views = b.output ? outputs : inputs;
      ONNXTRAIN_CHECK(b.index < views.size() && views[b.index].data != nullptr,
                      spec_.op_type + " (oneDNN): argument " + std::to_string(b.index) + " missing at run");
      args_[b.arg].set_data_handle(views[b.index].data);
    }
    checked(spec_, "execution", [&] {
      primitive_.execute(cpu_stream(), args_);
      cpu_stream().wait();
    });
    if (finish_) finish_(inputs, outputs);
    if (keep_ && stream.keeps_derived_values()) keep_(stream, inputs);
  }

 private:
  struct Binding {
    int arg;
    size_t index;
    bool output;
  };
  void bind(int arg, size_t index, bool output, const dnnl::memory::desc& desc) {
    args_[arg] = dnnl::memory(desc, cpu_engine(), DNNL_MEMORY_NONE);
    bindings_.push_back({arg, index, output});
  }

  KernelSpec spec_;
  dnnl::primitive primitive_;
  std::unordered_map<int, dnnl::memory> args_;
  std::vector<Binding> bindings_;
  std::vector<std::vector<float>> owned_;
  Finish finish_;
  Keep keep_;
};

}  // namespace onnxtrain::onednn
