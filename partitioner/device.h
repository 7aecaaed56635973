// What the cost model and the planner know about a device and the link between two of them: peak
// FLOP/s per dtype, memory size and bandwidth, the efficiency the kernels reach, a per-kernel overhead,
// and the link's bandwidth and latency. Three sources: datasheet presets (device_presets.h), a JSON
// file a user writes (`--device-profile FILE.json`), and the local CPU measured at start
// (measure_local_cpu in cpu_probe.h, which needs the kernels library).
//
//   DeviceDescription h100 = device_from_preset("h100", "nvlink4");
//   double t = h100.kernel_seconds(/*flops=*/2e9, /*bytes=*/8e6, DType::Float32);   // one kernel
//   double send = h100.link.seconds(4e6);                                            // one message
//   DeviceDescription mine = read_device_profile("cluster.json");  // throws Error naming file and field
//
// The JSON format of read_device_profile (every rate in base units: FLOP/s, bytes, bytes/s, seconds):
//
//   {
//     "preset": "h100",                  // optional: start from a device preset, the fields below override
//     "name": "my GPU",                  // optional with a preset, else required
//     "fp32_flops": 67e12,               // required without a preset; > 0
//     "tf32_flops": 494e12,              // optional (0 or absent: unknown)
//     "bf16_flops": 989e12, "fp16_flops": 989e12, "fp64_flops": 34e12,   // optional
//     "use_tf32": false,                 // optional: float32 Conv/MatMul/Gemm at the TF32 rate
//     "memory_bytes": 80e9,              // required without a preset; > 0
//     "memory_bandwidth": 3.35e12,       // required without a preset; > 0
//     "compute_efficiency": 0.5,         // optional, in (0, 1]
//     "memory_efficiency": 0.8,          // optional, in (0, 1]
//     "kernel_overhead_s": 5e-6,         // optional, >= 0
//     "step_overhead_s": 10e-6,          // optional, >= 0: a recurrent step's fixed cost (default 2 kernels)
//     "link": "nvlink4"                  // optional: a link preset name, or an object
//     // "link": {"preset": "ib-ndr", "bandwidth": 40e9}   (a preset with overrides), or
//     // "link": {"name": "10GbE", "bandwidth": 1.25e9, "latency_s": 20e-6}   (both numbers required)
//   }
//
// Unknown keys are an error (a misspelt key would otherwise silently keep a default).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "graph/dtype.h"

namespace onnxtrain {

struct LinkDescription {
  std::string name;      // "NVLink 4 (H100/H200 SXM, 18 links)"
  double bandwidth = 0;  // bytes/s per direction
  double latency_s = 0;  // seconds per message
  // Time to send one message of `bytes` one way; 0 for nothing to send.
  double seconds(double bytes) const { return bytes > 0 ? latency_s + bytes / bandwidth : 0.0; }
};

struct DeviceDescription {
  std::string name;       // "NVIDIA H100 SXM5 80GB", "local CPU (avx2, 2 threads)"
  std::string source;     // where the figures come from: "preset h100-sxm", "file X.json", "measured ..."
  double fp32_flops = 0;  // FLOP/s, peak (or, for the measured CPU, the GEMM probe's rate)
  double tf32_flops = 0, bf16_flops = 0, fp16_flops = 0, fp64_flops = 0;  // 0: not known
  bool use_tf32 = false;  // float32 Conv/MatMul/Gemm run at tf32_flops (cuDNN/cuBLAS TF32 math)
  uint64_t memory_bytes = 0;
  double memory_bandwidth = 0;      // bytes/s
  double compute_efficiency = 0.5;  // the fraction of peak FLOP/s real kernels reach
  double memory_efficiency = 0.8;   // the fraction of peak bandwidth real kernels reach
  double kernel_overhead_s = 0;     // fixed cost per kernel (launch, dispatch)
  // Fixed cost of one time step of a recurrent op beyond its FLOPs: the state's small product and the gates'
  // passes, one after another. Two kernel launches on a GPU (the CUDA kernels' cuBLAS call and cell kernel);
  // on the CPU measured (cpu_probe.h): 3.2 us at 16 units on one EPYC core, four times the step's FLOPs.
  double step_overhead_s = 0;
  LinkDescription link;  // between two devices of this kind

  // Peak FLOP/s for kernels of this dtype: the dtype's own rate where known, else fp32 (fp64: half of it).
  // `tensor_core_op`: a Conv/MatMul/Gemm-like op, which use_tf32 moves to the TF32 rate.
  double peak_flops(DType dtype, bool tensor_core_op = false) const;
  // One kernel: overhead + max(flops at the efficiency, bytes at the memory efficiency).
  double kernel_seconds(double flops, double bytes, DType dtype, bool tensor_core_op = false) const;
};

// A preset device (device_presets.h) with the default efficiencies and a 5 µs kernel overhead; the link
// preset when named, else PCIe 5 for H100/H200 and PCIe 4 for A100. Throws Error for unknown names.
DeviceDescription device_from_preset(std::string_view device, std::string_view link = "");
LinkDescription link_from_preset(std::string_view link);

// A fixed CPU, not this machine's measured rates (100 GFLOP/s, 20 GB/s, 1 us a kernel, 3 us a recurrent
// step, shared memory at 10 GB/s): what `train` plans its pipeline stages with when it has no --plan, so that the
// split, and with it every number of the run, does not depend on the load at start.
DeviceDescription nominal_cpu();

// `--device-profile FILE.json`: throws Error naming the file and the field at fault.
DeviceDescription read_device_profile(const std::string& path);
// The same from text; `source` names it in errors ("cluster.json").
DeviceDescription parse_device_profile(const std::string& json_text, const std::string& source);

// A link as device profiles write it: a preset name ("\"nvlink4\"") or an object (see above); `source`
// names it in errors.
LinkDescription parse_link_description(const std::string& json_text, const std::string& source);

// One line for reports: "NVIDIA H100 SXM5 80GB: fp32 67.0 TFLOP/s, 80.0 GB at 3350 GB/s, link ..."
std::string describe_device(const DeviceDescription& device);

}  // namespace onnxtrain
