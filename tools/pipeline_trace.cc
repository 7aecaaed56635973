#include "tools/pipeline_trace.h"

namespace onnxtrain::cli {
namespace {

struct OpLabel {
  const char* name;      // the span's name prefix
  const char* category;  // Chrome trace "cat"
};

OpLabel label_of(Op op) {
  switch (op) {
    case Op::Forward:
      return {"F", "forward"};
    case Op::Backward:
      return {"B", "backward"};
    case Op::SendActivation:
      return {"send act ", "send"};
    case Op::RecvActivation:
      return {"recv act ", "recv"};
    case Op::SendGradient:
      return {"send grad ", "send"};
    case Op::RecvGradient:
      return {"recv grad ", "recv"};
    case Op::OptimizerStep:
      return {"update", "update"};
    case Op::Flush:
      return {"flush", "update"};
  }
  return {"?", "other"};
}

}  // namespace

void append_trace_events(nlohmann::json& events, const std::vector<std::vector<TraceSpan>>& stages,
                         const std::string& process_name, int pid, bool micro_batches) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process_name}}}});
  for (size_t k = 0; k < stages.size(); ++k) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", k},
                      {"args", {{"name", "stage " + std::to_string(k)}}}});
    for (const TraceSpan& s : stages[k]) {
      const OpLabel label = label_of(s.op);
      std::string name = label.name;
      const bool per_batch = s.op != Op::OptimizerStep && s.op != Op::Flush;
      if (per_batch) name += std::to_string(s.mini_batch);
      if (per_batch && micro_batches) name += "." + std::to_string(s.micro_batch);
      if (s.version >= 0) name += " v" + std::to_string(s.version);
      nlohmann::json args = {{"mini_batch", s.mini_batch}, {"micro_batch", s.micro_batch}};
      if (s.version >= 0) args["version"] = s.version;
      events.push_back({{"name", name},
                        {"cat", label.category},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", k},
                        {"ts", 1e6 * s.start_s},
                        {"dur", 1e6 * (s.end_s - s.start_s)},
                        {"args", args}});
    }
  }
}

}  // namespace onnxtrain::cli
