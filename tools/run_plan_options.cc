#include "tools/run_plan_options.h"

#include <algorithm>

#include "executor/optimizer.h"
#include "executor/pipeline/schedule.h"
#include "executor/weight_prediction.h"
#include "simulator/strategy_simulation.h"

namespace onnxtrain::cli {

PlanOptions run_plan_options(const RunPlanChoices& run) {
  PlanOptions p;
  p.stages = run.stages;
  p.schedule = parse_pipeline_strategy(run.strategy);
  p.micro_batches = std::max<int64_t>(run.micro_batches, 1);
  p.link = run.link;
  p.optimizer_slots = optimizer_state_slots(run.optimizer);
  OptimizerConfig optimizer;
  apply_optimizer_name(run.optimizer, optimizer);
  p.prediction_average = gradient_estimate(optimizer) == GradientEstimate::kept_average;
  p.prediction_metrics = run.prediction_metrics;
  // As the CPU executor runs them: gradients summed in place, the update mirrored into the working weights.
  p.gradients_into_sum = p.update_writes_working = run.cpu_executor;
  return p;
}

}  // namespace onnxtrain::cli
