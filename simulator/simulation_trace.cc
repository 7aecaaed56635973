#include "simulator/simulation_trace.h"

namespace onnxtrain {
namespace {

std::string span_name(const SimTask& t) {
  const std::string mb = t.micro_batch >= 0 ? std::to_string(t.micro_batch) : "";
  switch (t.kind) {
    case TaskKind::forward:
      return "F" + mb;
    case TaskKind::backward:
      return "B" + mb;
    case TaskKind::update:
      return "update";
    default:
      return std::string(task_kind_name(t.kind)) + (mb.empty() ? "" : " " + mb);
  }
}

}  // namespace

void append_simulation_events(nlohmann::json& events, const EventSimulation& sim, const std::string& process_name,
                              int pid) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process_name}}}});
  const auto& names = sim.resource_names();
  for (size_t r = 0; r < names.size(); ++r)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", r}, {"args", {{"name", names[r]}}}});
  for (size_t id = 0; id < sim.tasks().size(); ++id) {
    const SimTask& t = sim.tasks()[id];
    if (t.seconds <= 0) continue;
    nlohmann::json args = {{"micro_batch", t.micro_batch}};
    if (t.bytes > 0) args["bytes"] = t.bytes;
    const int task = static_cast<int>(id);
    events.push_back({{"name", span_name(t)},
                      {"cat", task_kind_name(t.kind)},
                      {"ph", "X"},
                      {"pid", pid},
                      {"tid", t.resource},
                      {"ts", 1e6 * sim.start(task)},
                      {"dur", 1e6 * (sim.end(task) - sim.start(task))},
                      {"args", args}});
  }
}

}  // namespace onnxtrain
