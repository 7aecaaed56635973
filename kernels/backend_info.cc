#include "kernels/backend_info.h"

#include <oneapi/dnnl/dnnl.h>

#include <sstream>
#include <thread>

namespace onnxtrain {
namespace {

std::string cpu_runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_NONE:
      return "none";
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "unknown (" + std::to_string(runtime) + ")";
  }
}

std::string cpu_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_all:
      return "all";
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default: {
      std::ostringstream s;
      s << "unknown (0x" << std::hex << static_cast<unsigned>(isa) << ")";
      return s.str();
    }
  }
}

}  // namespace

bool cpu_has_native_bf16() {
  static const bool native = [] {
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
  }();
  return native;
}

BackendInfo query_backend_info() {
  BackendInfo info;
  if (const dnnl_version_t* v = dnnl_version()) {
    info.onednn_version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    info.onednn_git_hash = v->hash ? v->hash : "";
    info.onednn_cpu_runtime = cpu_runtime_name(v->cpu_runtime);
  }
  info.cpu_isa = cpu_isa_name(dnnl_get_effective_cpu_isa());
  info.cpu_threads = std::thread::hardware_concurrency();
  info.cuda = cuda::query_devices();
  return info;
}

std::string format_backend_info(const BackendInfo& info) {
  std::ostringstream out;
  out << "oneDNN " << (info.onednn_version.empty() ? "unknown" : info.onednn_version);
  if (!info.onednn_cpu_runtime.empty()) out << " (" << info.onednn_cpu_runtime << ")";
  out << ", CPU ISA " << info.cpu_isa << ", " << info.cpu_threads << " hardware threads\n";

  const cuda::CudaQuery& c = info.cuda;
  if (!c.compiled) {
    out << "CUDA: " << c.unavailable_reason << "\n";
    return out.str();
  }
  out << "CUDA compiled (toolkit " << (c.toolkit_version.empty() ? "?" : c.toolkit_version) << ", runtime "
      << (c.runtime_version ? cuda::format_cuda_version(c.runtime_version) : "?") << ", driver "
      << (c.driver_version ? cuda::format_cuda_version(c.driver_version) : "none");
  if (!c.cublas_version.empty()) out << ", cuBLAS " << c.cublas_version;
  if (!c.cudnn_version.empty()) out << ", cuDNN " << c.cudnn_version;
  out << ")";
  if (c.devices.empty()) {
    out << ": " << c.unavailable_reason << "\n";
    return out.str();
  }
  out << ": " << c.devices.size() << " device(s)\n";
  for (const cuda::CudaDeviceProperties& d : c.devices) {
    out << "  cuda:" << d.index << "  " << d.name << "  sm_" << d.compute_capability_major << d.compute_capability_minor
        << "  " << (d.total_memory_bytes >> 20) << " MiB  " << d.multiprocessor_count << " SMs";
    if (!d.pci_bus_id.empty()) out << "  " << d.pci_bus_id;
    out << "\n";
  }
  return out.str();
}

}  // namespace onnxtrain
