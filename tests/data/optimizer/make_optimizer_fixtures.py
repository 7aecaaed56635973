#!/usr/bin/python3
"""Makes the torch.optim parity fixtures of tests/optimizer_test.cc (PyTorch 1.13, float32, CPU).

Run from anywhere: /usr/bin/python3 tests/data/optimizer/make_optimizer_fixtures.py
Writes next to this script:
  w0.npy                 the initial parameter, float32 (3, 4)
  grads.npy              the gradient fed at each step, float32 (STEPS, 3, 4)
  <config>.npy           the parameter after each step, float32 (STEPS, 3, 4), one per optimizer config
  lr_<schedule>.npy      the learning rate torch's scheduler gives at each step, float64 (LR_STEPS,)
The configs' hyper-parameters are repeated in the C++ test's table: keep both in step.
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 6
LR_STEPS = 12

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "sgd_weight_decay": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_dampening": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adam_weight_decay": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    "adamw_amsgrad": lambda p: torch.optim.AdamW(p, lr=0.02, betas=(0.9, 0.95), weight_decay=0.01, amsgrad=True),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
    "adagrad_decay": lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.01,
                                                   initial_accumulator_value=0.5, eps=1e-8),
}

lr_sched = torch.optim.lr_scheduler
SCHEDULES = {
    "constant": lambda o: None,
    "step": lambda o: lr_sched.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda o: lr_sched.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    "warmup": lambda o: lr_sched.LinearLR(o, start_factor=0.2, total_iters=4),
    "warmup_cosine": lambda o: lr_sched.SequentialLR(o, [lr_sched.LinearLR(o, start_factor=0.1, total_iters=3),
                                                         lr_sched.CosineAnnealingLR(o, T_max=6, eta_min=0.001)],
                                                     milestones=[3]),
    "warmup_step": lambda o: lr_sched.SequentialLR(o, [lr_sched.LinearLR(o, start_factor=0.25, total_iters=2),
                                                       lr_sched.StepLR(o, step_size=4, gamma=0.1)],
                                                   milestones=[2]),
}
# Optimizer + schedule runs: the optimizer reads the schedule's lr every step.
SCHEDULED = {
    "sgd_momentum_warmup_cosine": ("sgd_momentum", "warmup_cosine"),
    "adam_step": ("adam", "step"),
}


def trajectory(make_optimizer, w0, grads, make_schedule=None):
    w = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    optimizer = make_optimizer([w])
    for group in optimizer.param_groups:
        group["foreach"] = False  # the single-tensor loop: the reference semantics
    schedule = make_schedule(optimizer) if make_schedule else None
    out = []
    for g in grads:
        w.grad = torch.from_numpy(g.copy())
        optimizer.step()
        if schedule is not None:
            schedule.step()
        out.append(w.detach().numpy().copy())
    return np.stack(out)


def learning_rates(make_schedule, base_lr=0.1):
    w = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([w], lr=base_lr)
    schedule = make_schedule(optimizer)
    lrs = []
    for _ in range(LR_STEPS):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if schedule is not None:
            schedule.step()
    return np.array(lrs, dtype=np.float64)


def main():
    rng = np.random.default_rng(20261130)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = rng.standard_normal((STEPS, 3, 4)).astype(np.float32)
    np.save(os.path.join(HERE, "w0.npy"), w0)
    np.save(os.path.join(HERE, "grads.npy"), grads)
    for name, make in OPTIMIZERS.items():
        np.save(os.path.join(HERE, name + ".npy"), trajectory(make, w0, grads))
    for name, make in SCHEDULES.items():
        np.save(os.path.join(HERE, "lr_" + name + ".npy"), learning_rates(make))
    for name, (optimizer, schedule) in SCHEDULED.items():
        np.save(os.path.join(HERE, name + ".npy"), trajectory(OPTIMIZERS[optimizer], w0, grads, SCHEDULES[schedule]))


if __name__ == "__main__":
    main()
