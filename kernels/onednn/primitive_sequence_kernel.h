// A oneDNN kernel that runs several primitives in order, for backward ops that need a forward pass first:
// a forward_training primitive gives the statistics (BatchNormalizationGrad, LayerNormalizationGrad) or the
// workspace (MaxPoolGrad, LRNGrad) that the backward primitive then reads. Small memories the steps share
// (mean, variance) are kernel-owned buffers; data-sized ones only one run reads (blocked-layout copies,
// a workspace, outputs nobody asked for) are transient: placed in the running thread's ScratchArena
// (kernels/scratch_arena.h) for the run. Caller buffers are bound per run; one scratchpad serves every
// step (they run one after another). Everything is prepared once, at kernel preparation.
//
//   PrimitiveSequenceKernel k(spec);
//   size_t fwd = k.add_step(fwd_pd, dnnl::layer_normalization_forward(fwd_pd));
//   dnnl::memory mean = k.own(stat), dst = k.transient(data);
//   k.bind_input(fwd, DNNL_ARG_SRC, 1, data);
//   k.set(fwd, DNNL_ARG_MEAN, mean);
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/primitive_kernel.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {

class PrimitiveSequenceKernel final : public Kernel {
 public:
  explicit PrimitiveSequenceKernel(const KernelSpec& spec) : spec_(spec) {}

  // Appends a step; returns its index.
  size_t add_step(const dnnl::primitive_desc_base& pd, dnnl::primitive primitive) {
    steps_.push_back({std::move(primitive), {}, pd.scratchpad_desc()});
    steps_.back().args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), nullptr);
    return steps_.size() - 1;
  }
  void bind_input(size_t step, int arg, size_t index, const dnnl::memory::desc& desc) {
    bind(step, arg, index, false, desc);
  }
  void bind_output(size_t step, int arg, size_t index, const dnnl::memory::desc& desc) {
    bind(step, arg, index, true, desc);
  }
  // A kernel-owned buffer, kept between runs (statistics shared between steps, read by the finish step).
  dnnl::memory own(const dnnl::memory::desc& desc) {
    owned_.emplace_back(desc.get_size() / sizeof(float) + 1);
    return dnnl::memory(desc, cpu_engine(), owned_.back().data());
  }
  // A buffer that holds memory only during a run, in the running thread's arena.
  dnnl::memory transient(const dnnl::memory::desc& desc) {
    transient_.emplace_back(desc, cpu_engine(), nullptr);
    return transient_.back();
  }
  void set(size_t step, int arg, const dnnl::memory& memory) { steps_.at(step).args[arg] = memory; }
  // Output `index` where the caller asked for it, else a transient buffer.
  void bind_output_or_discard(size_t step, int arg, size_t index, const dnnl::memory::desc& desc) {
    if (index < spec_.outputs.size() && spec_.outputs[index].present()) {
      bind_output(step, arg, index, desc);
    } else {
      set(step, arg, transient(desc));
    }
  }

  // Per run, step `step` is skipped where `check` returns true; the check may write what the step would
  // have (statistics an earlier kernel of the run kept, Stream::derived).
  using SkipCheck = std::function<bool(const Stream&, std::span<const TensorView> inputs)>;
  void skip_when(size_t step, SkipCheck check) { steps_.at(step).skip = std::move(check); }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    ScratchArena::Lease lease;
    for (dnnl::memory& m : transient_) m.set_data_handle(lease.take(m.get_desc().get_size()));
    std::byte* scratchpad = lease.take(scratchpad_bytes());
    for (Step& s : steps_) s.args[DNNL_ARG_SCRATCHPAD].set_data_handle(scratchpad);
    for (Binding& b : bindings_) {
      std::span<const TensorView> views = b.output ? outputs : inputs;
      ONNXTRAIN_CHECK(b.index < views.size() && views[b.index].data != nullptr,
                      spec_.op_type + " (oneDNN): argument " + std::to_string(b.index) + " missing at run");
      steps_[b.step].args[b.arg].set_data_handle(views[b.index].data);
    }
    checked(spec_, "execution", [&] {
      for (Step& s : steps_) {
        if (s.skip && s.skip(stream, inputs)) continue;
        s.primitive.execute(cpu_stream(), s.args);
      }
      cpu_stream().wait();
    });
    if (finish_) finish_(inputs, outputs);
    if (keep_ && stream.keeps_derived_values()) keep_(stream, inputs);
  }

  // A host step after the primitives (running statistics).
  void set_finish(PrimitiveKernel::Finish finish) { finish_ = std::move(finish); }
  // A host step after that, on streams that keep derived values: what a later kernel of the run may read.
  using Keep = std::function<void(Stream&, std::span<const TensorView> inputs)>;
  void set_keep(Keep keep) { keep_ = std::move(keep); }

 private:
  struct Step {
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> args;
    dnnl::memory::desc scratchpad;
    SkipCheck skip;
  };
  struct Binding {
    size_t step;
    int arg;
    size_t index;
    bool output;
  };

  void bind(size_t step, int arg, size_t index, bool output, const dnnl::memory::desc& desc) {
    steps_.at(step).args[arg] = dnnl::memory(desc, cpu_engine(), DNNL_MEMORY_NONE);
    bindings_.push_back({step, arg, index, output});
  }
  size_t scratchpad_bytes() const {
    size_t size = 0;
    for (const Step& s : steps_) size = std::max(size, s.scratchpad.get_size());
    return size;
  }

  KernelSpec spec_;
  std::vector<Step> steps_;
  std::vector<Binding> bindings_;
  std::vector<std::vector<float>> owned_;
  std::vector<dnnl::memory> transient_;  // handles to the same memory objects the steps' arguments hold
  PrimitiveKernel::Finish finish_;
  Keep keep_;
};

// --- blocked layouts: a step that converts between the caller's plain buffer and a kernel-owned one ---

// The channel block of oneDNN's JIT batch-norm kernels on this CPU: 16 channels for its AVX-512 kernels,
// 8 for its SSE4.1/AVX/AVX2 ones. Blocks of 16 on an AVX2 CPU fall back to the reference kernel
// (bnorm_ref:any): on an AMD EPYC it took 1.0 s of a 1.2 s ResNet fixture training step (batch 32).
inline bool channel_block_is_16() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_mic:
    case dnnl::cpu_isa::avx512_mic_4ops:
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

// The channel-blocked layout (nChw16c or nChw8c, as channel_block_is_16 says, and their 1D/3D kin) for
// N,C,spatial data of rank 3 to 5: oneDNN's batch-norm kernels are several times faster on it than on
// plain NCHW, which its ncsp path handles channel by channel. Rank 2 (N,C) stays plain.
inline dnnl::memory::desc channel_blocked_desc(const std::vector<int64_t>& sizes) {
  using tag = dnnl::memory::format_tag;
  static const bool wide = channel_block_is_16();
  const tag t = sizes.size() == 3   ? (wide ? tag::nCw16c : tag::nCw8c)
                : sizes.size() == 4 ? (wide ? tag::nChw16c : tag::nChw8c)
                                    : (wide ? tag::nCdhw16c : tag::nCdhw8c);
  return dnnl::memory::desc(dnnl::memory::dims(sizes.begin(), sizes.end()), dnnl::memory::data_type::f32, t);
}

// Appends a reorder of caller input `index` (plain) into a new transient buffer of `to`; returns it.
inline dnnl::memory add_input_reorder(PrimitiveSequenceKernel& kernel, size_t index, const dnnl::memory::desc& plain,
                                      const dnnl::memory::desc& to) {
  const dnnl::memory converted = kernel.transient(to);
  const dnnl::reorder::primitive_desc pd(cpu_engine(), plain, cpu_engine(), to, user_scratchpad_attr());
  const size_t step = kernel.add_step(pd, dnnl::reorder(pd));
  kernel.bind_input(step, DNNL_ARG_FROM, index, plain);
  kernel.set(step, DNNL_ARG_TO, converted);
  return converted;
}

// Appends a reorder of `from` (a transient buffer) into caller output `index` (plain).
inline void add_output_reorder(PrimitiveSequenceKernel& kernel, const dnnl::memory& from, size_t index,
                               const dnnl::memory::desc& plain) {
  const dnnl::reorder::primitive_desc pd(cpu_engine(), from.get_desc(), cpu_engine(), plain, user_scratchpad_attr());
  const size_t step = kernel.add_step(pd, dnnl::reorder(pd));
  kernel.set(step, DNNL_ARG_FROM, from);
  kernel.bind_output(step, DNNL_ARG_TO, index, plain);
}

// --- the steps BatchNormalizationGrad and LayerNormalizationGrad share ---
struct NormStatistics {
  dnnl::memory mean, variance;  // kernel-owned
  size_t step = 0;              // the step that computes them
};

// Appends a forward_training step (normalization_flags::none) over X (input 1) for its mean and population
// variance; its DST goes to a transient buffer.
inline NormStatistics add_statistics_step(PrimitiveSequenceKernel& kernel, const dnnl::primitive_desc& pd,
                                          dnnl::primitive primitive, const dnnl::memory::desc& data,
                                          const dnnl::memory::desc& stat) {
  NormStatistics stats{kernel.own(stat), kernel.own(stat)};
  const size_t step = stats.step = kernel.add_step(pd, std::move(primitive));
  kernel.bind_input(step, DNNL_ARG_SRC, 1, data);
  kernel.set(step, DNNL_ARG_DST, kernel.transient(data));
  kernel.set(step, DNNL_ARG_MEAN, stats.mean);
  kernel.set(step, DNNL_ARG_VARIANCE, stats.variance);
  return stats;
}

// Appends the backward step (prop_kind::backward, use_scale | use_shift): dY (input 0), X (1) and Scale (2)
// in, dX, dScale and dBias out (outputs 0..2, transient where the caller omitted them). The caller sets
// or binds DNNL_ARG_MEAN and DNNL_ARG_VARIANCE on the returned step.
inline size_t add_norm_backward_step(PrimitiveSequenceKernel& kernel, const dnnl::primitive_desc& pd,
                                     dnnl::primitive primitive, const dnnl::memory::desc& data,
                                     const dnnl::memory::desc& weights) {
  const size_t step = kernel.add_step(pd, std::move(primitive));
  kernel.bind_input(step, DNNL_ARG_DIFF_DST, 0, data);
  kernel.bind_input(step, DNNL_ARG_SRC, 1, data);
  kernel.bind_input(step, DNNL_ARG_SCALE, 2, weights);
  // oneDNN counts SHIFT among the backward's inputs with use_shift (which makes it compute DIFF_SHIFT),
  // though the gradients do not depend on it.
  kernel.set(step, DNNL_ARG_SHIFT, kernel.own(weights));
  kernel.bind_output_or_discard(step, DNNL_ARG_DIFF_SRC, 0, data);
  kernel.bind_output_or_discard(step, DNNL_ARG_DIFF_SCALE, 1, weights);
  kernel.bind_output_or_discard(step, DNNL_ARG_DIFF_SHIFT, 2, weights);
  return step;
}

inline void set_statistics(PrimitiveSequenceKernel& kernel, size_t step, const NormStatistics& stats) {
  kernel.set(step, DNNL_ARG_MEAN, stats.mean);
  kernel.set(step, DNNL_ARG_VARIANCE, stats.variance);
}

// The batch mean and population variance a training-mode BatchNormalization keeps for its gradient in the
// same run, under its X's address (Stream::derived): C floats of each, in that order. The gradient's
// statistics step recomputed exactly these (the same primitive over the same X in the same layout).
inline std::string batch_statistics_key(int64_t channels) {
  return "BatchNormalization batch mean and variance of " + std::to_string(channels) + " channels";
}

// The row means and population variances a LayerNormalization keeps for its gradient in the same run, under
// its X's address, X viewed as (rows, width): rows floats of each, in that order.
inline std::string layer_norm_statistics_key(int64_t rows, int64_t width) {
  return "LayerNormalization mean and variance of " + std::to_string(rows) + " rows of " + std::to_string(width);
}

// Keeps `channels` means and variances under X's address for the gradient of the run (`key`:
// batch_statistics_key, or layer_norm_statistics_key with `channels` the rows).
inline void keep_norm_statistics(Stream& stream, const void* x, const std::string& key, const float* mean,
                                 const float* variance, int64_t channels) {
  const size_t bytes = static_cast<size_t>(channels) * sizeof(float);
  auto kept = std::make_shared<std::vector<std::byte>>(2 * bytes);
  std::memcpy(kept->data(), mean, bytes);
  std::memcpy(kept->data() + bytes, variance, bytes);
  stream.keep_derived(x, key, std::move(kept));
}

// Skips `step` (statistics over X, input `x_input`) where the forward of the run kept them under `key`,
// copying them into `stats`.
inline void reuse_forward_statistics(PrimitiveSequenceKernel& kernel, size_t step, const NormStatistics& stats,
                                     size_t x_input, int64_t channels, const std::string& key) {
  auto* mean = static_cast<float*>(stats.mean.get_data_handle());
  auto* variance = static_cast<float*>(stats.variance.get_data_handle());
  kernel.skip_when(step, [=](const Stream& stream, std::span<const TensorView> inputs) {
    const Stream::Derived kept = stream.derived(inputs[x_input].data, key);
    if (!kept) return false;
    const auto* values = reinterpret_cast<const float*>(kept->data());
    std::memcpy(mean, values, static_cast<size_t>(channels) * sizeof(float));
    std::memcpy(variance, values + channels, static_cast<size_t>(channels) * sizeof(float));
    return true;
  });
}

}  // namespace onnxtrain::onednn
