#include "executor/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "graph/error.h"

namespace onnxtrain {

double LrSchedule::lr_at(int64_t step) const {
  if (step < warmup_steps)
    return base_lr * (warmup_start_factor + (1.0 - warmup_start_factor) * static_cast<double>(step) / warmup_steps);
  const int64_t t = step - warmup_steps;
  switch (kind) {
    case LrScheduleKind::constant:
      return base_lr;
    case LrScheduleKind::step:
      return base_lr * std::pow(gamma, static_cast<double>(t / step_size));
    case LrScheduleKind::cosine:
      return eta_min + (base_lr - eta_min) * (1.0 + std::cos(std::numbers::pi * t / t_max)) / 2.0;
  }
  return base_lr;
}

void LrSchedule::validate() const {
  auto fail = [](const std::string& what) { throw Error("learning-rate schedule: " + what); };
  if (!(base_lr >= 0)) fail("the learning rate must be >= 0, got " + std::to_string(base_lr));
  if (kind == LrScheduleKind::step && step_size < 1) fail("step_size must be >= 1, got " + std::to_string(step_size));
  if (kind == LrScheduleKind::cosine && t_max < 1) fail("t_max must be >= 1, got " + std::to_string(t_max));
  if (warmup_steps < 0) fail("warmup_steps must be >= 0, got " + std::to_string(warmup_steps));
  if (warmup_steps > 0 && !(warmup_start_factor > 0 && warmup_start_factor <= 1))
    fail("warmup_start_factor must be in (0, 1], got " + std::to_string(warmup_start_factor));
}

LrScheduleKind lr_schedule_kind_from_name(const std::string& name) {
  for (LrScheduleKind kind : {LrScheduleKind::constant, LrScheduleKind::step, LrScheduleKind::cosine})
    if (name == lr_schedule_kind_name(kind)) return kind;
  throw Error("unknown learning-rate schedule '" + name + "' (expected constant, step or cosine)");
}

const char* lr_schedule_kind_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::constant:
      return "constant";
    case LrScheduleKind::step:
      return "step";
    case LrScheduleKind::cosine:
      return "cosine";
  }
  return "?";
}

}  // namespace onnxtrain
