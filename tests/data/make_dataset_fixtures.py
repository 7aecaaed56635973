#!/usr/bin/python3
"""Makes the small .npz fixtures of tests/dataset_test.cc (run from anywhere; writes next to this script).

  dataset_savez.npz             numpy.savez (stored):  x uint8 (5,4,4) = arange % 256, y int64 [0,1,2,0,1]
  dataset_savez_compressed.npz  numpy.savez_compressed (deflated): inputs float32 (6,3) = arange / 10,
                                labels int32 [2,1,0,2,1,0]
  dataset_keras_layout.npz      numpy.savez_compressed: x_train float64 (4,2,2) = arange / 16,
                                y_train uint8 [1,0,1,0], x_test float64 (2,2,2) = 1 - arange / 8, y_test uint8 [0,1]
  dataset_other_names.npz       numpy.savez: images, targets (names load_dataset does not accept)
  dataset_x_labels.npz          numpy.savez: x float32 (3,1,2,2) = arange, labels int64 [2,1,0] (the inputs'
                                and the labels' names from different pairs)
  dataset_tokens.npz            numpy.savez: input_ids int32 (4,6) = arange % 50, labels int64 (4,6) = the
                                ids shifted by one, with labels[0,1] = -100 (ignored)
  dataset_tokens_bad_label.npz  the same with labels[2,3] = 50 (above 50 classes)
  dataset_transformer.npz       numpy.savez: input_ids int64 (96,16) in [0,100) from seed 3, labels int64 (96)
                                = the first id mod 10: what models/transformer_opset17.onnx reads
  dataset_bert_masked.npz       numpy.savez: what models/transformers/bert_masked_*.onnx reads, from seed 5:
                                192 rows of 16 positions, each row's first L in [6, 16] real (ids in
                                [1, 256), attention_mask 1), the rest padding (id 0, mask 0);
                                token_type_ids 0 on the first half of the real positions, 1 after;
                                labels int64 (192) = the first id mod 10
  dataset_t5_copy.npz           numpy.savez: what models/transformers/t5_*.onnx reads, from seed 6: input_ids
                                int64 (1024,16) in [1, 64); labels int64 (1024,16) = input_ids (copy the
                                sequence); decoder_input_ids = labels shifted right after T5's start id 0
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

rng = np.random.default_rng(5)
rows, positions = 192, 16
lengths = rng.integers(6, positions + 1, size=rows)
real = np.arange(positions)[None, :] < lengths[:, None]
bert_ids = np.where(real, rng.integers(1, 256, size=(rows, positions)), 0).astype(np.int64)
token_types = (real & (np.arange(positions)[None, :] >= (lengths[:, None] + 1) // 2)).astype(np.int64)
np.savez(os.path.join(here, "dataset_bert_masked.npz"), input_ids=bert_ids, attention_mask=real.astype(np.int64),
         token_type_ids=token_types, labels=(bert_ids[:, 0] % 10).astype(np.int64))
rng = np.random.default_rng(6)
copy_ids = rng.integers(1, 64, size=(1024, 16)).astype(np.int64)
decoder_ids = np.concatenate([np.zeros((1024, 1), dtype=np.int64), copy_ids[:, :-1]], axis=1)
np.savez(os.path.join(here, "dataset_t5_copy.npz"), input_ids=copy_ids, decoder_input_ids=decoder_ids, labels=copy_ids)
np.savez(os.path.join(here, "dataset_x_labels.npz"),
         x=np.arange(12, dtype=np.float32).reshape(3, 1, 2, 2), labels=np.array([2, 1, 0], dtype=np.int64))
