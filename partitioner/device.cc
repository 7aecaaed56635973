#include "partitioner/device.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "graph/error.h"
#include "partitioner/device_presets.h"

namespace onnxtrain {

namespace {

// Per-kernel launch cost on a GPU (CUDA launch plus framework dispatch), an order-of-magnitude figure.
constexpr double kGpuKernelOverhead = 5e-6;

}  // namespace

double DeviceDescription::peak_flops(DType dtype, bool tensor_core_op) const {
  switch (dtype) {
    case DType::Float16:
      return fp16_flops > 0 ? fp16_flops : fp32_flops;
    case DType::BFloat16:
      return bf16_flops > 0 ? bf16_flops : fp32_flops;
    case DType::Float64:
      return fp64_flops > 0 ? fp64_flops : fp32_flops / 2;
    default:
      return use_tf32 && tensor_core_op && tf32_flops > 0 ? tf32_flops : fp32_flops;
  }
}

double DeviceDescription::kernel_seconds(double flops, double bytes, DType dtype, bool tensor_core_op) const {
  const double compute = flops > 0 ? flops / (peak_flops(dtype, tensor_core_op) * compute_efficiency) : 0.0;
  const double memory = bytes > 0 ? bytes / (memory_bandwidth * memory_efficiency) : 0.0;
  return kernel_overhead_s + std::max(compute, memory);
}

DeviceDescription nominal_cpu() {
  return {.name = "nominal CPU",
          .source = "fixed",
          .fp32_flops = 1e11,
          .memory_bandwidth = 2e10,
          .kernel_overhead_s = 1e-6,
          .step_overhead_s = 3e-6,
          .link = {"shared memory", 1e10, 1e-6}};
}

LinkDescription link_from_preset(std::string_view link) {
  const LinkPreset& p = find_link_preset(link);
  return {std::string(p.display_name), p.bandwidth, p.latency_s};
}

DeviceDescription device_from_preset(std::string_view device, std::string_view link) {
  const DevicePreset& p = find_device_preset(device);
  DeviceDescription d;
  d.name = std::string(p.display_name);
  d.source = "preset " + std::string(p.name);
  d.fp32_flops = p.fp32_flops;
  d.tf32_flops = p.tf32_flops;
  d.bf16_flops = p.bf16_flops;
  d.fp16_flops = p.fp16_flops;
  d.memory_bytes = p.memory_bytes;
  d.memory_bandwidth = p.memory_bandwidth;
  d.kernel_overhead_s = kGpuKernelOverhead;
  d.step_overhead_s = 2 * kGpuKernelOverhead;
  if (link.empty()) link = p.name.starts_with("a100") ? "pcie4-x16" : "pcie5-x16";
  d.link = link_from_preset(link);
  return d;
}

namespace {

using nlohmann::json;

class ProfileReader {
 public:
  explicit ProfileReader(std::string source) : source_(std::move(source)) {}

  Error error(const std::string& field, const std::string& message) const {
    return Error(std::string("device profile: ") + (field.empty() ? "" : "field '" + field + "' ") + message)
        .in_file(source_);
  }

  // A number that must satisfy `ok`; when absent and not required, `out` keeps its value.
  void number(const json& object, const std::string& prefix, const char* key, double& out, bool required,
              bool (*ok)(double), const char* expected) const {
    const std::string field = prefix + key;
    auto it = object.find(key);
    if (it == object.end()) {
      if (required) throw error(field, "is missing (" + std::string(expected) + ")");
      return;
    }
    if (!it->is_number()) throw error(field, "must be a number (" + std::string(expected) + "), got " + it->dump());
    const double v = it->get<double>();
    if (!std::isfinite(v) || !ok(v)) throw error(field, "must be " + std::string(expected) + ", got " + it->dump());
    out = v;
  }

  void check_keys(const json& object, const std::string& prefix, std::initializer_list<const char*> known) const {
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        throw error(prefix + it.key(), "is not a known key (known: " + list + ")");
      }
    }
  }

  std::string string(const json& object, const std::string& prefix, const char* key) const {
    const json& v = object.at(key);
    if (!v.is_string()) throw error(prefix + key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

bool positive(double v) { return v > 0; }
bool non_negative(double v) { return v >= 0; }
bool fraction(double v) { return v > 0 && v <= 1; }

// A link preset name, or an object: a preset with overrides, or (without "preset") a full description.
LinkDescription read_link(const ProfileReader& r, const json& link) {
  if (link.is_string()) {
    try {
      return link_from_preset(link.get<std::string>());
    } catch (Error& e) {
      throw r.error("link", e.message());
    }
  }
  if (!link.is_object()) throw r.error("link", "must be a link preset name or an object, got " + link.dump());
  r.check_keys(link, "link.", {"preset", "name", "bandwidth", "latency_s"});
  LinkDescription out;
  const bool preset = link.contains("preset");
  if (preset) {
    try {
      out = link_from_preset(r.string(link, "link.", "preset"));
    } catch (Error& e) {
      if (e.message().starts_with("device profile")) throw;
      throw r.error("link.preset", e.message());
    }
  }
  if (link.contains("name")) out.name = r.string(link, "link.", "name");
  r.number(link, "link.", "bandwidth", out.bandwidth, !preset, positive, "bytes/s > 0");
  r.number(link, "link.", "latency_s", out.latency_s, !preset, non_negative, "seconds >= 0");
  if (out.name.empty()) out.name = "link";
  return out;
}

}  // namespace

DeviceDescription parse_device_profile(const std::string& json_text, const std::string& source) {
  ProfileReader r(source);
  json doc;
  try {
    doc = json::parse(json_text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double (1e400)
    throw Error(std::string("device profile: not valid JSON: ") + e.what()).in_file(source);
  }
  if (!doc.is_object()) throw r.error("", "must be a JSON object, got " + std::string(doc.type_name()));
  r.check_keys(doc, "",
               {"preset", "name", "fp32_flops", "tf32_flops", "bf16_flops", "fp16_flops", "fp64_flops", "use_tf32",
                "memory_bytes", "memory_bandwidth", "compute_efficiency", "memory_efficiency", "kernel_overhead_s",
                "step_overhead_s", "link"});

  DeviceDescription d;
  const bool preset = doc.contains("preset");
  if (preset) {
    const std::string name = r.string(doc, "", "preset");
    try {
      d = device_from_preset(name);
    } catch (Error& e) {
      throw r.error("preset", e.message());
    }
  }
  d.source = "file " + source;
  if (doc.contains("name"))
    d.name = r.string(doc, "", "name");
  else if (!preset)
    throw r.error("name", "is missing (a label for reports)");

  r.number(doc, "", "fp32_flops", d.fp32_flops, !preset, positive, "FLOP/s > 0");
  r.number(doc, "", "tf32_flops", d.tf32_flops, false, non_negative, "FLOP/s >= 0");
  r.number(doc, "", "bf16_flops", d.bf16_flops, false, non_negative, "FLOP/s >= 0");
  r.number(doc, "", "fp16_flops", d.fp16_flops, false, non_negative, "FLOP/s >= 0");
  r.number(doc, "", "fp64_flops", d.fp64_flops, false, non_negative, "FLOP/s >= 0");
  if (doc.contains("use_tf32")) {
    if (!doc["use_tf32"].is_boolean())
      throw r.error("use_tf32", "must be true or false, got " + doc["use_tf32"].dump());
    d.use_tf32 = doc["use_tf32"].get<bool>();
    if (d.use_tf32 && d.tf32_flops <= 0) throw r.error("use_tf32", "is true but tf32_flops is not given");
  }
  double memory_bytes = static_cast<double>(d.memory_bytes);
  r.number(doc, "", "memory_bytes", memory_bytes, !preset, positive, "bytes > 0");
  d.memory_bytes = static_cast<uint64_t>(memory_bytes);
  r.number(doc, "", "memory_bandwidth", d.memory_bandwidth, !preset, positive, "bytes/s > 0");
  r.number(doc, "", "compute_efficiency", d.compute_efficiency, false, fraction, "a fraction in (0, 1]");
  r.number(doc, "", "memory_efficiency", d.memory_efficiency, false, fraction, "a fraction in (0, 1]");
  r.number(doc, "", "kernel_overhead_s", d.kernel_overhead_s, false, non_negative, "seconds >= 0");
  if (!doc.contains("step_overhead_s")) d.step_overhead_s = 2 * d.kernel_overhead_s;
  r.number(doc, "", "step_overhead_s", d.step_overhead_s, false, non_negative, "seconds >= 0");
  if (doc.contains("link")) d.link = read_link(r, doc["link"]);
  return d;
}

LinkDescription parse_link_description(const std::string& json_text, const std::string& source) {
  ProfileReader r(source);
  json doc;
  try {
    doc = json::parse(json_text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double (1e400)
    throw Error(std::string("link: not valid JSON: ") + e.what()).in_file(source);
  }
  return read_link(r, doc);
}

DeviceDescription read_device_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("device profile: cannot open the file").in_file(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_device_profile(text.str(), path);
}

std::string describe_device(const DeviceDescription& d) {
  char line[512];
  std::snprintf(
      line, sizeof line, "%s: fp32 %.1f GFLOP/s%s, %.1f GB at %.1f GB/s (efficiency %.2f compute, %.2f memory)",
      d.name.c_str(), d.fp32_flops / 1e9,
      d.bf16_flops > 0 ? (", bf16 " + std::to_string(static_cast<long long>(d.bf16_flops / 1e9)) + " GFLOP/s").c_str()
                       : "",
      static_cast<double>(d.memory_bytes) / 1e9, d.memory_bandwidth / 1e9, d.compute_efficiency, d.memory_efficiency);
  std::string out = line;
  if (d.link.bandwidth > 0) {
    std::snprintf(line, sizeof line, "; link %s %.1f GB/s, %.1f us", d.link.name.c_str(), d.link.bandwidth / 1e9,
                  d.link.latency_s * 1e6);
    out += line;
  }
  return out;
}

}  // namespace onnxtrain
