"""Synthetic image classification data shared by the ONNX Runtime tests (tests/ort_inference_test.py,
tests/torchvision_acceptance_test.py): uint8 (N, 3, 32, 32) images, one random 8x8-block colour
template per class, shifted, dimmed and noised; the training file's rows are sorted by class, as many
user files are, and the test file's labels are drawn at random. Needs numpy."""
import os

import numpy as np

CLASSES = 10


def make_images(rng, templates, labels):
    """uint8 (N, 3, 32, 32): the class's template, shifted by up to 2 pixels, dimmed and noised."""
    n = len(labels)
    shifts = rng.integers(-2, 3, size=(n, 2))
    out = np.empty((n, 3, 32, 32), dtype=np.float32)
    for i, (label, (dy, dx)) in enumerate(zip(labels, shifts)):
        out[i] = np.roll(templates[label], (dy, dx), axis=(1, 2))
    out = out * rng.uniform(0.6, 1.0, size=(n, 1, 1, 1)) + rng.normal(0, 25, size=out.shape)
    return np.clip(out, 0, 255).astype(np.uint8)


def write_datasets(workdir, train_per_class, test_count, seed=7):
    """Writes workdir/sorted_train.npz (train_per_class rows of each class, sorted by label) and
    workdir/test.npz (test_count rows, labels at random), arrays x (uint8) and y (int64); returns
    (train path, test path, test images, test labels)."""
    rng = np.random.default_rng(seed)
    templates = rng.uniform(0, 255, size=(CLASSES, 3, 8, 8)).repeat(4, axis=2).repeat(4, axis=3)
    train_labels = np.repeat(np.arange(CLASSES), train_per_class)  # sorted by class
    test_labels = rng.integers(0, CLASSES, size=test_count)
    train, test = os.path.join(workdir, "sorted_train.npz"), os.path.join(workdir, "test.npz")
    np.savez(train, x=make_images(rng, templates, train_labels), y=train_labels.astype(np.int64))
    x_test = make_images(rng, templates, test_labels)
    np.savez(test, x=x_test, y=test_labels.astype(np.int64))
    return train, test, x_test, test_labels
