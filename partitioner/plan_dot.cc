#include "partitioner/plan_dot.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "graph/atomic_file.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

// Pastel fills (ColorBrewer Set3) so black labels stay readable; stages beyond 12 reuse them.
constexpr const char* kColours[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                    "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string format_byte_size(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 3) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[unit]);
  return buf;
}

std::string plan_to_dot(const Plan& plan, std::span<const PlanEdge> edges) {
  const int64_t n = static_cast<int64_t>(plan.node_names.size());
  std::vector<int> stage_of(static_cast<size_t>(n), -1);
  for (const StagePlan& s : plan.stages)
    for (int64_t i = s.first_node; i < s.end_node && i < n; ++i) stage_of[static_cast<size_t>(i)] = s.index;
  std::string out =
      "digraph plan {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontsize=10];\n"
      "  edge [fontsize=9, color=\"#777777\"];\n";
  out += "  label=" +
         quoted((plan.model.empty() ? std::string("plan") : plan.model) + ": " + std::to_string(plan.stages.size()) +
                " stages, " + std::string(pipeline_strategy_name(plan.options.schedule))) +
         ";\n";
  for (const StagePlan& s : plan.stages) {
    char time[64];
    std::snprintf(time, sizeof time, "%.3g ms", s.time_seconds * 1e3);
    out += "  subgraph cluster_" + std::to_string(s.index) + " {\n    style=dashed;\n    label=" +
           quoted("stage " + std::to_string(s.index) + ": " + time + ", " + format_byte_size(s.memory.total)) + ";\n";
    const char* colour = kColours[static_cast<size_t>(s.index) % std::size(kColours)];
    for (int64_t i = s.first_node; i < s.end_node; ++i)
      out += "    n" + std::to_string(i) + " [label=" + quoted(plan.node_names[static_cast<size_t>(i)]) +
             ", fillcolor=\"" + colour + "\"];\n";
    out += "  }\n";
  }
  for (const PlanEdge& e : edges) {
    if (e.producer < 0 || e.consumer >= n || e.producer >= e.consumer)
      throw Error("graph edge '" + e.tensor + "' from node " + std::to_string(e.producer) + " to node " +
                  std::to_string(e.consumer) + " is not a forward edge between the plan's " + std::to_string(n) +
                  " nodes");
    out += "  n" + std::to_string(e.producer) + " -> n" + std::to_string(e.consumer);
    const int from = stage_of[static_cast<size_t>(e.producer)], to = stage_of[static_cast<size_t>(e.consumer)];
    if (from != to)
      out += " [color=\"#d62728\", penwidth=2, fontcolor=\"#d62728\", label=" +
             quoted(e.tensor + "\n" + format_byte_size(e.bytes) +
                    (to - from > 1 ? ", crosses " + std::to_string(to - from) + " cuts" : "")) +
             "]";
    out += ";\n";
  }
  return out + "}\n";
}

void write_plan_dot(const Plan& plan, std::span<const PlanEdge> edges, const std::string& path) {
  write_file_atomically(path, plan_to_dot(plan, edges));
}

}  // namespace onnxtrain
