#include "simulator/machine.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "graph/error.h"

namespace onnxtrain {
namespace {

struct MachinePreset {
  std::string_view name, display, device, intra, inter, host;
  int nodes, devices_per_node;
};

// Links: partitioner/device_presets.cc (NVLink 3 300 GB/s and NVLink 4 450 GB/s per direction per GPU,
// PCIe 4/5 x16 32/64 GB/s, InfiniBand NDR 400 Gb/s = 50 GB/s per GPU's NIC).
constexpr std::array<MachinePreset, 5> kPresets = {{
    {"8xa100-pcie4", "1 node x 8 A100 80GB, PCIe 4 between GPUs", "a100-80gb-sxm", "pcie4-x16", "", "pcie4-x16", 1, 8},
    {"8xa100-nvlink3", "1 node x 8 A100 SXM 80GB, NVLink 3", "a100-80gb-sxm", "nvlink3", "", "pcie4-x16", 1, 8},
    {"8xh100", "1 node x 8 H100 SXM 80GB, NVLink 4", "h100-sxm", "nvlink4", "", "pcie5-x16", 1, 8},
    {"8xh200", "1 node x 8 H200 SXM 141GB, NVLink 4", "h200-sxm", "nvlink4", "", "pcie5-x16", 1, 8},
    {"2x8xh100-ib", "2 nodes x 8 H100 SXM, NVLink 4 within, InfiniBand NDR 400 Gb/s per GPU between", "h100-sxm",
     "nvlink4", "ib-ndr", "pcie5-x16", 2, 8},
}};

using nlohmann::json;

Error machine_error(const std::string& source, const std::string& field, const std::string& message) {
  return Error("machine: " + (field.empty() ? "" : "field '" + field + "' ") + message).in_file(source);
}

int positive_count(const json& doc, const char* key, const std::string& source) {
  if (!doc.contains(key)) return 1;
  const json& v = doc[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 100000)
    throw machine_error(source, key, "must be an integer from 1 to 100000, got " + v.dump());
  return v.get<int>();
}

LinkDescription link_field(const json& doc, const char* key, const std::string& source) {
  try {
    return parse_link_description(doc[key].dump(), source);
  } catch (const Error& e) {
    throw machine_error(source, key, e.message());
  }
}

}  // namespace

const LinkDescription& Machine::link(int a, int b) const {
  return a / devices_per_node == b / devices_per_node ? intra_node : inter_node;
}

LinkDescription Machine::ring_link(int count) const {
  if (count <= devices_per_node) return intra_node;
  const double across = inter_node.bandwidth * devices_per_node;
  return {inter_node.name + " x " + std::to_string(devices_per_node) + " rings", std::min(intra_node.bandwidth, across),
          std::max(intra_node.latency_s, inter_node.latency_s)};
}

std::string Machine::describe() const {
  char line[512];
  std::snprintf(
      line, sizeof line, "%s: %d x %d %s; within a node %s %.0f GB/s%s%s", name.c_str(), nodes, devices_per_node,
      device.name.c_str(), intra_node.name.c_str(), intra_node.bandwidth / 1e9, nodes > 1 ? ", between nodes " : "",
      nodes > 1
          ? (inter_node.name + " " + std::to_string(static_cast<int>(inter_node.bandwidth / 1e9)) + " GB/s").c_str()
          : "");
  return line;
}

Machine machine_from_preset(std::string_view name) {
  for (const MachinePreset& p : kPresets) {
    if (p.name != name) continue;
    Machine m;
    m.name = std::string(p.display);
    m.source = "preset " + std::string(p.name);
    m.nodes = p.nodes;
    m.devices_per_node = p.devices_per_node;
    m.device = device_from_preset(p.device, p.intra);
    m.intra_node = m.device.link;
    m.inter_node = p.inter.empty() ? m.intra_node : link_from_preset(p.inter);
    m.host = link_from_preset(p.host);
    return m;
  }
  throw Error("unknown machine preset '" + std::string(name) + "' (known: " + known_machine_presets() +
              "; or a JSON file describing the machine)");
}

std::string known_machine_presets() {
  std::string names;
  for (const MachinePreset& p : kPresets) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

Machine machine_from_argument(const std::string& preset_or_path) {
  for (const MachinePreset& p : kPresets)
    if (p.name == preset_or_path) return machine_from_preset(preset_or_path);
  if (preset_or_path.ends_with(".json")) return read_machine(preset_or_path);
  return machine_from_preset(preset_or_path);
}

Machine read_machine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the machine description").in_file(path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_machine(text.str(), path);
}

Machine parse_machine(const std::string& json_text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double (1e400)
    throw Error(std::string("machine: not valid JSON: ") + e.what()).in_file(source);
  }
  if (!doc.is_object()) throw machine_error(source, "", "must be a JSON object");
  static constexpr const char* kKeys[] = {
      "name", "nodes", "devices_per_node", "device", "intra_node_link", "inter_node_link", "host_link"};
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known |= it.key() == k;
    if (!known)
      throw machine_error(source, it.key(),
                          "is not a known key (known: name, nodes, devices_per_node, device, "
                          "intra_node_link, inter_node_link, host_link)");
  }
  Machine m;
  m.source = "file " + source;
  m.name = doc.contains("name") && doc["name"].is_string() ? doc["name"].get<std::string>() : source;
  m.nodes = positive_count(doc, "nodes", source);
  m.devices_per_node = positive_count(doc, "devices_per_node", source);
  if (!doc.contains("device"))
    throw machine_error(source, "device", "is missing (a device preset name or a device profile object)");
  try {
    m.device = doc["device"].is_string() ? device_from_preset(doc["device"].get<std::string>())
                                         : parse_device_profile(doc["device"].dump(), source);
  } catch (const Error& e) {
    throw machine_error(source, "device", e.message());
  }
  m.intra_node = doc.contains("intra_node_link") ? link_field(doc, "intra_node_link", source) : m.device.link;
  m.device.link = m.intra_node;
  if (m.nodes > 1 && !doc.contains("inter_node_link"))
    throw machine_error(source, "inter_node_link", "is missing (needed with more than one node)");
  m.inter_node = doc.contains("inter_node_link") ? link_field(doc, "inter_node_link", source) : m.intra_node;
  const bool a100 = m.device.name.find("A100") != std::string::npos;
  m.host = doc.contains("host_link") ? link_field(doc, "host_link", source)
                                     : link_from_preset(a100 ? "pcie4-x16" : "pcie5-x16");
  return m;
}

}  // namespace onnxtrain
