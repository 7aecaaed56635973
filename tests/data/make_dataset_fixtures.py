#!/usr/bin/python3
"""Makes the small .npz fixtures of tests/dataset_test.cc (run from anywhere; writes next to this script).

  dataset_savez.npz             numpy.savez (stored):  x uint8 (5,4,4) = arange % 256, y int64 [0,1,2,0,1]
  dataset_savez_compressed.npz  numpy.savez_compressed (deflated): inputs float32 (6,3) = arange / 10,
                                labels int32 [2,1,0,2,1,0]
  dataset_keras_layout.npz      numpy.savez_compressed: x_train float64 (4,2,2) = arange / 16,
                                y_train uint8 [1,0,1,0], x_test float64 (2,2,2) = 1 - arange / 8, y_test uint8 [0,1]
  dataset_other_names.npz       numpy.savez: images, targets (names load_dataset does not accept)
  dataset_tokens.npz            numpy.savez: input_ids int32 (4,6) = arange % 50, labels int64 (4,6) = the
                                ids shifted by one, with labels[0,1] = -100 (ignored)
  dataset_tokens_bad_label.npz  the same with labels[2,3] = 50 (above 50 classes)
  dataset_transformer.npz       numpy.savez: input_ids int64 (96,16) in [0,100) from seed 3, labels int64 (96)
                                = the first id mod 10: what models/transformer_opset17.onnx reads
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
np.savez(os.path.join(here, "dataset_savez.npz"),
         x=(np.arange(5 * 4 * 4) % 256).astype(np.uint8).reshape(5, 4, 4),
         y=np.array([0, 1, 2, 0, 1], dtype=np.int64))
np.savez_compressed(os.path.join(here, "dataset_savez_compressed.npz"),
                    inputs=(np.arange(18, dtype=np.float32) / 10).reshape(6, 3),
                    labels=np.array([2, 1, 0, 2, 1, 0], dtype=np.int32))
np.savez_compressed(os.path.join(here, "dataset_keras_layout.npz"),
                    x_train=(np.arange(16, dtype=np.float64) / 16).reshape(4, 2, 2),
                    y_train=np.array([1, 0, 1, 0], dtype=np.uint8),
                    x_test=(1 - np.arange(8, dtype=np.float64) / 8).reshape(2, 2, 2),
                    y_test=np.array([0, 1], dtype=np.uint8))
np.savez(os.path.join(here, "dataset_other_names.npz"),
         images=np.zeros((2, 2), dtype=np.float32), targets=np.array([0, 1], dtype=np.int64))
ids = (np.arange(24) % 50).astype(np.int32).reshape(4, 6)
token_labels = ((ids + 1) % 50).astype(np.int64)
token_labels[0, 1] = -100
token_labels[3, 5] = 49  # the highest label: 50 classes
np.savez(os.path.join(here, "dataset_tokens.npz"), input_ids=ids, labels=token_labels)
bad_labels = token_labels.copy()
bad_labels[2, 3] = 50
np.savez(os.path.join(here, "dataset_tokens_bad_label.npz"), input_ids=ids, labels=bad_labels)
rng = np.random.default_rng(3)
transformer_ids = rng.integers(0, 100, (96, 16)).astype(np.int64)
np.savez(os.path.join(here, "dataset_transformer.npz"), input_ids=transformer_ids,
         labels=(transformer_ids[:, 0] % 10).astype(np.int64))
