#!/usr/bin/python3
"""PyTorch oracle for tests/loss_test.cc: for each loss kind and reduction, small random logits and
targets (also a language model's (N,T,V) logits against (N,T) labels, sce_tokens_*), torch's loss value and d loss / d logits, as .npy files NAME_{logits,target,loss,grad}.npy.

Reduction "none" is trained as the sum of the per-element losses (attach_loss's documented rule), so its
gradient is that of loss.sum(); NAME_loss.npy holds the per-element losses, NAME_grad.npy that gradient.
Run from anywhere with a python that has torch and numpy; it rewrites the files next to itself. The files
were made with torch 1.13 (Debian's python3-torch), the sce_smooth_* and sce_tokens_smooth_* ones (label
smoothing) with torch 2.15 from the package index; 2.15 rewrites bce_none_loss.npy one ulp apart.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, logits, target, fn):
    x = torch.tensor(logits, requires_grad=True)
    loss = fn(x, torch.tensor(target))
    (loss if loss.dim() == 0 else loss.sum()).backward()
    np.save(os.path.join(HERE, name + "_logits.npy"), logits)
    np.save(os.path.join(HERE, name + "_target.npy"), target)
    np.save(os.path.join(HERE, name + "_loss.npy"), loss.detach().numpy().astype(np.float32))
    np.save(os.path.join(HERE, name + "_grad.npy"), x.grad.numpy().astype(np.float32))


def token_cross_entropy(logits, labels, reduction):
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction=reduction)
    return loss.reshape(labels.shape) if reduction == "none" else loss


def main():
    rng = np.random.default_rng(20261130)
    logits = rng.normal(0, 2, (6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 6).astype(np.int64)
    ignored = labels.copy()
    ignored[[1, 4]] = -100  # PyTorch's default ignore_index, present among the labels
    spatial = rng.normal(0, 2, (2, 4, 3)).astype(np.float32)  # (N,C,d)
    spatial_labels = rng.integers(0, 4, (2, 3)).astype(np.int64)
    for reduction in ("mean", "sum", "none"):
        ce = lambda x, t, r=reduction: F.cross_entropy(x, t, reduction=r)
        save("sce_" + reduction, logits, labels, ce)
        save("sce_ignore_" + reduction, logits, ignored, ce)
        save("sce_spatial_" + reduction, spatial, spatial_labels, ce)

    y = rng.normal(0, 1, (4, 3)).astype(np.float32)
    t = rng.normal(0, 1, (4, 3)).astype(np.float32)
    gap = np.abs(y - t)
    t = np.where(gap < 0.05, t + 0.2, t).astype(np.float32)  # keep |y - t| away from L1's kink
    # logits away from 0, where the stable BCE form's subgradient differs from torch's sigmoid(0) - t
    z = (rng.normal(0, 3, (4, 3)) + 0.1).astype(np.float32)
    z = np.where(np.abs(z) < 0.05, 0.5, z).astype(np.float32)
    z[0, 0] = 40.0  # large logits: the stable form must not overflow
    z[0, 1] = -40.0
    p = rng.uniform(0, 1, (4, 3)).astype(np.float32)  # soft targets in [0, 1]
    for reduction in ("mean", "sum", "none"):
        save("mse_" + reduction, y, t, lambda x, u, r=reduction: F.mse_loss(x, u, reduction=r))
        save("l1_" + reduction, y, t, lambda x, u, r=reduction: F.l1_loss(x, u, reduction=r))
        save("bce_" + reduction, z, p,
             lambda x, u, r=reduction: F.binary_cross_entropy_with_logits(x, u, reduction=r))

    # A language model's (N, T, V) logits against (N, T) next-token labels, some ignored: torch flattens
    # them, as GPT-2's loss does. A stream of its own, so the fixtures above stay as they were.
    lm = np.random.default_rng(20261201)
    tokens = lm.normal(0, 2, (2, 5, 7)).astype(np.float32)
    token_labels = lm.integers(0, 7, (2, 5)).astype(np.int64)
    token_labels[0, 1] = token_labels[1, 4] = -100
    for reduction in ("mean", "sum", "none"):
        save("sce_tokens_" + reduction, tokens, token_labels, lambda x, t, r=reduction: token_cross_entropy(x, t, r))

    # --label-smoothing 0.1 (F.cross_entropy's label_smoothing), with ignored labels, on (N,C) rows and on a
    # language model's (N,T,V) logits. A stream of its own, so the fixtures above stay as they were.
    smooth = np.random.default_rng(20261202)
    rows = smooth.normal(0, 2, (6, 5)).astype(np.float32)
    row_labels = smooth.integers(0, 5, 6).astype(np.int64)
    row_labels[2] = -100
    seq = smooth.normal(0, 2, (2, 4, 6)).astype(np.float32)
    seq_labels = smooth.integers(0, 6, (2, 4)).astype(np.int64)
    seq_labels[1, 3] = -100
    for reduction in ("mean", "sum", "none"):
        save("sce_smooth_" + reduction, rows, row_labels,
             lambda x, t, r=reduction: F.cross_entropy(x, t, reduction=r, label_smoothing=0.1))
        save("sce_tokens_smooth_" + reduction, seq, seq_labels,
             lambda x, t, r=reduction: F.cross_entropy(x.reshape(-1, x.shape[-1]), t.reshape(-1), reduction=r,
                                                       label_smoothing=0.1).reshape(t.shape if r == "none" else ()))


if __name__ == "__main__":
    main()
