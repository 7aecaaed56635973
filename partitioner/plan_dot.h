// Graphviz picture of a plan: one cluster per stage, nodes filled with their stage's colour, and every
// edge that crosses a stage boundary drawn bold and labelled with its tensor and bytes per micro-batch.
// It takes the graph's edges as plain data so it needs neither the IR nor the cost model.
//
//   std::vector<PlanEdge> edges = {{0, 1, 4096, "conv1_out"}, {1, 5, 4096, "skip"}};
//   write_plan_dot(plan, edges, "plan.dot");   // then: dot -Tsvg plan.dot -o plan.svg
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "partitioner/planner.h"

namespace onnxtrain {

// A tensor from node `producer` to node `consumer` (indices into plan.node_names, producer < consumer).
struct PlanEdge {
  int64_t producer = 0, consumer = 0;
  int64_t bytes = 0;  // per micro-batch
  std::string tensor;
};

std::string plan_to_dot(const Plan& plan, std::span<const PlanEdge> edges);  // throws Error on a bad edge
void write_plan_dot(const Plan& plan, std::span<const PlanEdge> edges, const std::string& path);

// "512 B", "12.0 KiB", "3.25 MiB", "1.50 GiB"
std::string format_byte_size(int64_t bytes);

}  // namespace onnxtrain
