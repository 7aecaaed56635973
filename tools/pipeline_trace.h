// A pipeline run as a Chrome trace (the JSON that Perfetto and chrome://tracing open): one process per
// timeline (the measured run; later a simulated one beside it), one track per stage, a span per
// instruction: forward "F3 v2" (mini-batch 3 reading weight version 2), backward "B3 v1", "update",
// "send act 3", "recv grad 3" (a receive's span is the time the stage waited), gpipe's micro-batches
// as "F3.1".
//
//   nlohmann::json events = nlohmann::json::array();
//   append_trace_events(events, trainer.trace(), "measured: pipedream, 2 stages", /*pid=*/1, false);
//   write_text_file("trace.json", nlohmann::json{{"traceEvents", events}}.dump());
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/pipeline/pipeline_trainer.h"

namespace onnxtrain::cli {

// `micro_batches`: name spans "F3.1" (gpipe's micro-batch 1 of mini-batch 3) rather than "F3".
void append_trace_events(nlohmann::json& events, const std::vector<std::vector<TraceSpan>>& stages,
                         const std::string& process_name, int pid, bool micro_batches);

}  // namespace onnxtrain::cli
