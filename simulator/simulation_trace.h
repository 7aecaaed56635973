// A simulated timeline as Chrome trace events (the JSON Perfetto and chrome://tracing open), in the
// shape tools/pipeline_trace.h gives a measured run, so the two sit side by side in one file: one
// process per timeline, one track per resource (stage, replica, link, ring, shard), a span per task named
// like the measured ones ("F3", "B3", "update", "send 3", "allreduce 3"); zero-length tasks are left out.
//
//   nlohmann::json events = nlohmann::json::array();
//   append_simulation_events(events, *simulation.sim, "simulated: pipedream:2", /*pid=*/2);
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "simulator/event_simulation.h"

namespace onnxtrain {

void append_simulation_events(nlohmann::json& events, const EventSimulation& sim, const std::string& process_name,
                              int pid);

}  // namespace onnxtrain
