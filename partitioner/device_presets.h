// Datasheet descriptions of GPUs and interconnects we may not have, so the partitioner can plan for
// them (`onnxtrain partition --device-preset h100-sxm --link nvlink4`). All rates are dense (no
// structured sparsity) peak figures; the cost model scales them by its own efficiency factors.
//
//   const DevicePreset& gpu = find_device_preset("H200");      // names are case-insensitive
//   double seconds = flops / gpu.bf16_flops + bytes / gpu.memory_bandwidth;
//   const LinkPreset& link = find_link_preset("nvlink4");
//   double transfer = link.latency_s + bytes / link.bandwidth;
//   find_device_preset("v100");  // throws Error: unknown device preset 'v100' (known: a100-80gb-sxm, ...)
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace onnxtrain {

struct DevicePreset {
  std::string_view name;                    // canonical lookup name, "h100-sxm"
  std::array<std::string_view, 2> aliases;  // other accepted names, "h100"; empty entries unused
  std::string_view display_name;            // "NVIDIA H100 SXM5 80GB"
  double fp32_flops = 0;                    // FLOP/s, CUDA cores (no tensor cores)
  double tf32_flops = 0;                    // FLOP/s, tensor cores, dense
  double bf16_flops = 0;                    // FLOP/s, tensor cores, dense
  double fp16_flops = 0;                    // FLOP/s, tensor cores, dense
  std::uint64_t memory_bytes = 0;           // device memory as the datasheet states it (decimal GB)
  double memory_bandwidth = 0;              // bytes/s
};

struct LinkPreset {
  std::string_view name;  // canonical lookup name, "nvlink4"
  std::array<std::string_view, 2> aliases;
  std::string_view display_name;  // "NVLink 4 (H100/H200 SXM, 18 links)"
  double bandwidth = 0;           // bytes/s per direction
  double latency_s = 0;           // seconds per message; an estimate, see device_presets.cc
};

std::span<const DevicePreset> device_presets();
std::span<const LinkPreset> link_presets();

// Lookup by canonical name or alias, case-insensitive, '_' and ' ' read as '-'. Throws onnxtrain::Error
// naming the known presets when nothing matches.
const DevicePreset& find_device_preset(std::string_view name);
const LinkPreset& find_link_preset(std::string_view name);

// "a100-80gb-sxm, h100-sxm, h200-sxm"
std::string known_device_preset_names();
std::string known_link_preset_names();

}  // namespace onnxtrain
