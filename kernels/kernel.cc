#include "kernels/kernel.h"

#include <algorithm>
#include <numeric>

#include "graph/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

std::string_view device_kind_name(DeviceKind device) { return device == DeviceKind::Cpu ? "cpu" : "cuda"; }

std::string Device::name() const { return kind == DeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

uint64_t random_stream_seed(uint64_t seed, uint64_t run_index) {
  auto splitmix64 = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return splitmix64(seed ^ splitmix64(run_index));
}

Stream::Derived Stream::derived(const void* source, const std::string& how) const {
  if (!keeps_derived_) return nullptr;
  auto it = derived_.find({source, how});
  return it == derived_.end() ? nullptr : it->second;
}

void Stream::keep_derived(const void* source, const std::string& how, Derived value) {
  if (keeps_derived_) derived_[{source, how}] = std::move(value);
}

void Stream::adopt_derived(const DerivedMap& from) {
  if (keeps_derived_)
    for (const auto& [key, value] : from) derived_[key] = value;
}

void Stream::start_or_continue_sum(OutputSums& sums, const void* buffer, bool add) {
  auto [it, added] = sums.try_emplace(buffer);
  OutputSum& sum = it->second;
  sum.first = !add;
  if (!add || added) {
    sum.kept = false;
    sum.overwrite = !add;
    sum.deferred.reset();
  }
}

Stream::OutputSum* Stream::output_sum(const void* buffer) const {
  if (!sums_) return nullptr;
  auto it = sums_->find(buffer);
  return it == sums_->end() ? nullptr : &it->second;
}

void Stream::copy_derived_of(const void* source, DerivedMap& to) const {
  for (auto it = derived_.lower_bound({source, std::string()}); it != derived_.end() && it->first.first == source; ++it)
    to[it->first] = it->second;
}

void Stream::forget_derived(const void* source) {
  // Entries of one address are adjacent: the map orders by address first.
  auto it = derived_.lower_bound({source, std::string()});
  while (it != derived_.end() && it->first.first == source) it = derived_.erase(it);
}

static int64_t product(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

int64_t TensorDesc::numel() const { return product(sizes); }
int64_t TensorView::numel() const { return product(sizes); }

void KernelRegistry::add(KernelEntry entry) {
  for (const KernelEntry& e : entries_) {
    ONNXTRAIN_CHECK(!(e.domain == entry.domain && e.op_type == entry.op_type && e.device == entry.device &&
                      e.implementation == entry.implementation),
                    "kernel registered twice: " + entry.op_type + " (" + entry.implementation + ")");
  }
  entries_.push_back(std::move(entry));
}

const KernelEntry* KernelRegistry::find(const std::string& domain, const std::string& op_type, DeviceKind device,
                                        DType dtype, const std::string& implementation) const {
  const std::string d = domain == "ai.onnx" ? std::string() : domain;
  const KernelEntry* reference = nullptr;
  for (const KernelEntry& e : entries_) {
    if (e.domain != d || e.op_type != op_type || e.device != device) continue;
    if (std::find(e.dtypes.begin(), e.dtypes.end(), dtype) == e.dtypes.end()) continue;
    if (!implementation.empty()) {
      if (e.implementation == implementation) return &e;
      continue;
    }
    if (e.implementation != "reference") return &e;
    reference = &e;
  }
  return reference;
}

std::vector<const KernelEntry*> KernelRegistry::all() const {
  std::vector<const KernelEntry*> list;
  for (const KernelEntry& e : entries_) list.push_back(&e);
  return list;
}

const KernelRegistry& KernelRegistry::builtin() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_reference_kernels(r);
    register_onednn_kernels(r);
    register_cpu_kernels(r);
#if ONNXTRAIN_WITH_CUDA
    register_cuda_kernels(r);
#endif
    return r;
  }();
  return registry;
}

DType kernel_dtype(const KernelSpec& spec) {
  for (const TensorDesc& in : spec.inputs)
    if (in.present()) return in.dtype;
  for (const TensorDesc& out : spec.outputs)
    if (out.present()) return out.dtype;
  return DType::Undefined;
}

}  // namespace onnxtrain
