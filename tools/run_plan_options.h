// The planner's options for a pipeline run as the executor will run it: its schedule, micro-batches, the
// optimizer's state tensors, SpecTrain's predictor, and on the CPU the executor's in-place gradient sums and
// mirrored updates. `onnxtrain partition` and `train` without --plan both plan with these, so that train's own
// split is the one `partition` prints for the same run (an outside check found them apart: train planned a
// gpipe run as pipedream, without the optimizer's update).
#pragma once

#include <cstdint>
#include <string>

#include "partitioner/planner.h"

namespace onnxtrain::cli {

struct RunPlanChoices {
  int stages = 1;
  std::string strategy = "pipedream";  // a pipeline strategy name (parse_pipeline_strategy)
  int64_t micro_batches = 1;
  std::string optimizer = "momentum";
  bool prediction_metrics = true;  // spectrain: the report scores each prediction
  bool cpu_executor = true;        // the stages run on the CPU
  PlanLink link;
};

PlanOptions run_plan_options(const RunPlanChoices& run);

}  // namespace onnxtrain::cli
