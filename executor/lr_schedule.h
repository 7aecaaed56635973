// Learning rate as a function of the optimizer step, with torch.optim.lr_scheduler's semantics applied
// per step (not per epoch): `lr_at(t)` is the rate of update t (0-based), i.e. what torch's optimizer
// uses when `scheduler.step()` is called after every `optimizer.step()`.
//
//   constant  lr(t) = base_lr
//   step      lr(t) = base_lr · gamma^⌊t / step_size⌋                                  (StepLR)
//   cosine    lr(t) = eta_min + (base_lr − eta_min)·(1 + cos(π·t / t_max)) / 2          (CosineAnnealingLR's
//             closed form; periodic past t_max, as torch's)
//   warm-up   with warmup_steps W > 0, for t < W: lr(t) = base_lr · (f + (1 − f)·t / W), f = warmup_start_factor
//             (LinearLR), then the schedule above restarts at t − W: torch's
//             SequentialLR([LinearLR(f, total_iters=W), S], milestones=[W]).
//
//   LrSchedule schedule{.kind = LrScheduleKind::cosine, .base_lr = 0.1, .t_max = 1000, .warmup_steps = 100};
//   double lr = schedule.lr_at(optimizer.global_step());
#pragma once

#include <cstdint>
#include <string>

namespace onnxtrain {

enum class LrScheduleKind { constant, step, cosine };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::constant;
  double base_lr = 0.01;
  int64_t step_size = 1;  // step: updates between decays
  double gamma = 0.1;     // step: decay factor
  int64_t t_max = 1;      // cosine: updates from base_lr down to eta_min
  double eta_min = 0.0;   // cosine: the floor
  int64_t warmup_steps = 0;
  double warmup_start_factor = 1.0 / 3.0;  // LinearLR's default

  double lr_at(int64_t step) const;
  // Throws Error when a field is out of range (step_size, t_max < 1, warmup_steps < 0, ...).
  void validate() const;
};

// "constant" | "step" | "cosine"; throws Error listing the known names.
LrScheduleKind lr_schedule_kind_from_name(const std::string& name);
const char* lr_schedule_kind_name(LrScheduleKind kind);

}  // namespace onnxtrain
