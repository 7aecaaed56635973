// The machines `onnxtrain simulate` plays strategies on: nodes of identical devices, the link between two
// devices of a node, the link between nodes (each device's own NIC, as on DGX-class machines), and the
// host link a device reaches host memory by (central storage and parameter servers keep the weights
// there, as TensorFlow does). Devices are numbered node-major: device d is on node d / devices_per_node.
//
//   Machine m = machine_from_preset("2x8xh100-ib");
//   m.link(7, 8);                // InfiniBand NDR: devices 7 and 8 sit on different nodes
//   m.ring_link(16);             // what a ring all-reduce over devices 0..15 sees: 8 NICs' worth between nodes
//   Machine mine = read_machine("cluster.json");   // throws Error naming the file and the field
//
// The JSON format (rates in base units; "device" and the links as in a device profile, partitioner/device.h):
//   {
//     "name": "my cluster",
//     "nodes": 2, "devices_per_node": 4,
//     "device": "h100",                      // a device preset, or a device profile object
//     "intra_node_link": "nvlink4",          // optional: default the device's link
//     "inter_node_link": {"preset": "ib-ndr", "bandwidth": 25e9},   // required when nodes > 1
//     "host_link": "pcie5-x16"               // optional: default PCIe 5 (PCIe 4 for A100)
//   }
#pragma once

#include <string>
#include <string_view>

#include "partitioner/device.h"

namespace onnxtrain {

struct Machine {
  std::string name, source;
  int nodes = 1, devices_per_node = 1;
  DeviceDescription device;
  LinkDescription intra_node, inter_node, host;

  int devices() const { return nodes * devices_per_node; }
  const LinkDescription& link(int a, int b) const;
  // The link a ring all-reduce over devices 0..count-1 sees. Within a node: the node's link. Across
  // nodes NCCL runs one ring per NIC side by side (every device has its own), each crossing between nodes
  // on a different NIC, so the rings together move devices_per_node times one NIC's bandwidth between
  // nodes: min(intra, devices_per_node · inter), at the inter-node latency.
  LinkDescription ring_link(int count) const;
  std::string describe() const;  // one line for reports
};

// "8xa100-pcie4", "8xa100-nvlink3", "8xh100", "8xh200", "2x8xh100-ib"; throws Error naming them.
Machine machine_from_preset(std::string_view name);
std::string known_machine_presets();
// A preset name, or else a JSON file (see above).
Machine machine_from_argument(const std::string& preset_or_path);
Machine read_machine(const std::string& path);
Machine parse_machine(const std::string& json_text, const std::string& source);

}  // namespace onnxtrain
