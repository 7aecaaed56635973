#include "partitioner/device_presets.h"

#include <algorithm>
#include <cctype>

#include "graph/error.h"

namespace onnxtrain {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr std::uint64_t kGB = 1'000'000'000ULL;

// Figures from NVIDIA's datasheets. Tensor-core rates there are printed "with sparsity" (marked *);
// the dense rate used here is half of that figure.
constexpr std::array kDevices = {
    // NVIDIA A100 Tensor Core GPU datasheet, "A100 80GB SXM" column: FP32 19.5 TFLOPS;
    // TF32 Tensor Core 156 TFLOPS (312* sparse); BF16 and FP16 Tensor Core 312 TFLOPS (624* sparse);
    // GPU memory 80GB HBM2e; GPU memory bandwidth 2,039 GB/s.
    DevicePreset{.name = "a100-80gb-sxm",
                 .aliases = {"a100", "a100-sxm"},
                 .display_name = "NVIDIA A100 SXM4 80GB",
                 .fp32_flops = 19.5 * kTera,
                 .tf32_flops = 156 * kTera,
                 .bf16_flops = 312 * kTera,
                 .fp16_flops = 312 * kTera,
                 .memory_bytes = 80 * kGB,
                 .memory_bandwidth = 2039 * kGiga},
    // NVIDIA H100 Tensor Core GPU datasheet, "H100 SXM" column: FP32 67 teraFLOPS; TF32 Tensor Core
    // 989* teraFLOPS; BF16 and FP16 Tensor Core 1,979* teraFLOPS (* with sparsity); GPU memory 80GB;
    // GPU memory bandwidth 3.35TB/s.
    DevicePreset{.name = "h100-sxm",
                 .aliases = {"h100", "h100-80gb-sxm"},
                 .display_name = "NVIDIA H100 SXM5 80GB",
                 .fp32_flops = 67 * kTera,
                 .tf32_flops = 989.0 / 2 * kTera,
                 .bf16_flops = 1979.0 / 2 * kTera,
                 .fp16_flops = 1979.0 / 2 * kTera,
                 .memory_bytes = 80 * kGB,
                 .memory_bandwidth = 3350 * kGiga},
    // NVIDIA H200 Tensor Core GPU datasheet, "H200 SXM" column: FP32 67 TFLOPS; TF32 Tensor Core
    // 989 TFLOPS*; BF16 and FP16 Tensor Core 1,979 TFLOPS* (* with sparsity); GPU memory 141GB;
    // GPU memory bandwidth 4.8TB/s.
    DevicePreset{.name = "h200-sxm",
                 .aliases = {"h200", "h200-141gb-sxm"},
                 .display_name = "NVIDIA H200 SXM 141GB",
                 .fp32_flops = 67 * kTera,
                 .tf32_flops = 989.0 / 2 * kTera,
                 .bf16_flops = 1979.0 / 2 * kTera,
                 .fp16_flops = 1979.0 / 2 * kTera,
                 .memory_bytes = 141 * kGB,
                 .memory_bandwidth = 4800 * kGiga},
};

// Bandwidth: per direction, from the datasheets (which quote PCIe and NVLink as the sum of both
// directions). Latency: no datasheet states an end-to-end message latency; these are typical small-
// message figures through the software stack (cudaMemcpy, NCCL send/recv, MPI), order-of-magnitude
// inputs for the cost model, to be replaced by profiled numbers where a machine is at hand.
constexpr std::array kLinks = {
    // A100 datasheet: "PCIe Gen4: 64GB/s" (both directions) -> 32 GB/s each way
    // (16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s raw).
    LinkPreset{.name = "pcie4-x16",
               .aliases = {"pcie4", "pcie-gen4"},
               .display_name = "PCIe 4.0 x16",
               .bandwidth = 32 * kGiga,
               .latency_s = 5e-6},
    // H100 / H200 datasheets: "PCIe Gen5: 128GB/s" (both directions) -> 64 GB/s each way.
    LinkPreset{.name = "pcie5-x16",
               .aliases = {"pcie5", "pcie-gen5"},
               .display_name = "PCIe 5.0 x16",
               .bandwidth = 64 * kGiga,
               .latency_s = 5e-6},
    // A100 datasheet: "NVIDIA NVLink: 600GB/s" (12 third-generation links, both directions) -> 300 GB/s each way.
    LinkPreset{.name = "nvlink3",
               .aliases = {"nvlink-a100", ""},
               .display_name = "NVLink 3 (A100 SXM, 12 links)",
               .bandwidth = 300 * kGiga,
               .latency_s = 3e-6},
    // H100 / H200 datasheets: "NVIDIA NVLink: 900GB/s" (18 fourth-generation links, both directions)
    // -> 450 GB/s each way.
    LinkPreset{.name = "nvlink4",
               .aliases = {"nvlink-h100", "nvlink-h200"},
               .display_name = "NVLink 4 (H100/H200 SXM, 18 links)",
               .bandwidth = 450 * kGiga,
               .latency_s = 3e-6},
    // ConnectX-6 / Quantum HDR datasheets: 200Gb/s per port -> 25 GB/s each way.
    LinkPreset{.name = "ib-hdr",
               .aliases = {"infiniband-hdr", "hdr"},
               .display_name = "InfiniBand HDR (200 Gb/s)",
               .bandwidth = 25 * kGiga,
               .latency_s = 5e-6},
    // ConnectX-7 / Quantum-2 NDR datasheets: 400Gb/s per port -> 50 GB/s each way.
    LinkPreset{.name = "ib-ndr",
               .aliases = {"infiniband-ndr", "ndr"},
               .display_name = "InfiniBand NDR (400 Gb/s)",
               .bandwidth = 50 * kGiga,
               .latency_s = 5e-6},
};

std::string normalize(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '_' || c == ' ') c = '-';
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

template <typename Preset>
bool matches(const Preset& preset, const std::string& wanted) {
  if (preset.name == wanted) return true;
  return std::any_of(preset.aliases.begin(), preset.aliases.end(),
                     [&](std::string_view alias) { return !alias.empty() && alias == wanted; });
}

template <typename Preset, std::size_t N>
std::string names_of(const std::array<Preset, N>& presets) {
  std::string names;
  for (const Preset& p : presets) {
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  return names;
}

template <typename Preset, std::size_t N>
const Preset& find_preset(const std::array<Preset, N>& presets, std::string_view name, const char* what) {
  const std::string wanted = normalize(name);
  for (const Preset& p : presets) {
    if (matches(p, wanted)) return p;
  }
  throw Error("unknown " + std::string(what) + " preset '" + std::string(name) + "' (known: " + names_of(presets) +
              ")");
}

}  // namespace

std::span<const DevicePreset> device_presets() { return kDevices; }
std::span<const LinkPreset> link_presets() { return kLinks; }

const DevicePreset& find_device_preset(std::string_view name) { return find_preset(kDevices, name, "device"); }
const LinkPreset& find_link_preset(std::string_view name) { return find_preset(kLinks, name, "link"); }

std::string known_device_preset_names() { return names_of(kDevices); }
std::string known_link_preset_names() { return names_of(kLinks); }

}  // namespace onnxtrain
