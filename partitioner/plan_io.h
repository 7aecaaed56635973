// plan.json: a Plan as the executor reads it. Stage ranges are node indices [first_node, end_node) into
// "nodes" (the profile's node names in topological order) with the first and last names repeated, the
// device ids of each stage's replicas, the options the plan was made with (schedule, N, M, replicas,
// links, optimizer slots, cap) and every predicted figure. Doubles round-trip exactly, so
// read_plan(write_plan(p)) == p.
//
//   write_plan(plan, "plan.json");
//   Plan p = read_plan("plan.json", node_names);  // Error if the file is damaged or for another model
//
// {"format": "onnxtrain-plan", "version": 1, "model": "resnet18", "device": "h100-sxm", "batch": 64,
//  "nodes": ["conv1", ...], "user_split": false,
//  "options": {"stages": 4, "schedule": "pipedream", "micro_batches": 8, "replicas": [], "devices": 0,
//              "link": {"name": "nvlink4", "bandwidth": 4.5e11, "latency_s": 2e-6}, "allreduce_link": {...},
//              "optimizer_slots": 1, "memory_cap": 0},
//  "stages": [{"index": 0, "first_node": 0, "end_node": 17, "first_name": "conv1", "last_name": "relu_4",
//              "replicas": 1, "devices": [0], "time_seconds": ..., "memory": {"total": ..., ...}, ...}, ...],
//  "predicted": {"bottleneck_seconds": ..., "throughput": ..., "bubble_fraction": ..., ...}}
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "partitioner/planner.h"

namespace onnxtrain {

std::string plan_to_json(const Plan& plan);  // pretty-printed, two-space indent
// `source` names the text in errors (a path). Checks the structure and that the stages tile the nodes.
Plan plan_from_json(std::string_view text, const std::string& source);

void write_plan(const Plan& plan, const std::string& path);  // via a temporary file and rename
Plan read_plan(const std::string& path);

// Throws Error unless the plan was made for exactly these nodes, naming the first difference.
void check_plan_matches(const Plan& plan, std::span<const std::string> node_names, const std::string& source);
Plan read_plan(const std::string& path, std::span<const std::string> node_names);

}  // namespace onnxtrain
