// Training checkpoints: everything `onnxtrain train --resume` needs to continue a run exactly where it
// stopped — the optimizer step count, the data loader's next batch, the run's seed, the options that
// must not change on resume, the model's parameters and BatchNorm running statistics, and the
// optimizer's state (`Optimizer::state_tensors()`).
//
//   TrainingCheckpoint c{.step = 1200, .next_epoch = 1, .next_batch = 356, .seed = 42,
//                        .config = {{"optimizer", "momentum"}, {"lr", 0.01}, {"batch", 64}},
//                        .tensors = trainer.trained_initializers(),
//                        .optimizer_state = trainer.optimizer().state_tensors()};
//   std::string written = write_checkpoint("ckpt", c);        // ckpt/checkpoint-00001200.otck
//
//   if (std::optional<std::string> path = latest_checkpoint("ckpt")) {
//     TrainingCheckpoint c = read_checkpoint(*path);         // throws Error on a damaged file
//     check_checkpoint_config(c, current_config, *path);     // lr 0.01 there, 0.1 here → Error
//     copy_checkpoint_tensors(c, model_tensors, *path);      // checks names/dtypes/shapes, then copies
//     optimizer.load_state(c.optimizer_state);
//     loader.seek(c.next_epoch, c.next_batch);
//   }
//
// Files: DIR/checkpoint-SSSSSSSS.otck, the step zero-padded to 8 digits (more when it needs them;
// readers parse the number, so order by step never depends on the padding). A writer writes
// DIR/checkpoint-SSSSSSSS.otck.tmp-PID, fsyncs it, renames it over the final name and fsyncs DIR, so a
// checkpoint file is either complete or absent; a temp file left by a writer killed mid-write is never
// read, and the next write_checkpoint into DIR deletes it (one writer per directory).
//
// Format (version 1; every integer little-endian):
//   14 bytes   magic "ONNXTRAINCKPT\0"
//   uint32     format version (1)
//   uint64     header length H
//   H bytes    header, UTF-8 JSON: {"format", "step", "next_epoch", "next_batch", "seed", "config",
//              "data_bytes", "export" (optional), "tensors": [{"name", "section": "param"|"optimizer"|"predictor",
//              "dtype": "float32" (dtype_name), "sizes": [...], "offset" (from the data start), "bytes", "crc32"}]}
//   uint32     CRC-32 (zlib's) of the H header bytes
//   data_bytes the tensors' raw row-major little-endian bytes, back to back in table order
// The file ends exactly there. Each tensor has its own CRC-32, so a flipped byte is reported with the
// tensor it hit. Reading is one header parse plus one read and one CRC pass per tensor (no per-element
// work): a 50 MB checkpoint reads in tens of milliseconds.
//
// Sharded checkpoints (runs over several ranks: data-parallel replicas, pipeline stages, processes):
// every rank writes its own part, DIR/checkpoint-SSSSSSSS.otck.shards/rank-RRRRR.otck (the same format,
// atomically, with the tensors that rank owns), then — after all of them are on disk — rank 0 writes the
// manifest DIR/checkpoint-SSSSSSSS.otck: the same format with no tensors and a "shards" list. So the
// newest complete checkpoint is always the newest manifest; shards of a step whose manifest is missing
// (a rank died mid-write) are never read, and rotation removes them with their step. read_checkpoint of a
// manifest reads every shard (each verified) and returns their union, so a checkpoint written under one
// layout (R replicas, N stages, one device) resumes under any other that holds the same parameters.
//
//   c_r.tensors = the tensors rank r owns; c_r.step = 1200 ...
//   write_checkpoint_shard("ckpt", c_r, r);                  // on every rank r
//   ... barrier ...
//   write_checkpoint("ckpt", {.step = 1200, ..., .shards = sharded_layout(R)}, keep);  // rank 0
//
// A damaged newest checkpoint is refused (read_checkpoint throws naming the file and the fault); nothing
// here falls back to an older checkpoint, since silently resuming from older state would repeat steps
// the user believes were done. The user deletes the bad file to resume from the one before it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain {

struct TrainingCheckpoint {
  int64_t step = 0;        // optimizer steps done
  int64_t next_epoch = 0;  // the data loader's position of the NEXT batch (frontend's LoaderPosition)
  int64_t next_batch = 0;
  uint64_t seed = 0;  // the run's seed (shuffling, initialisation)
  // Options that must match on resume (optimizer, lr, batch, loss, model path, ...), stored verbatim.
  nlohmann::json config = nlohmann::json::object();
  // Parameters and BatchNorm running statistics by initializer name. Any fixed-size DType (not
  // string/undefined); scalars (sizes {}) and empty tensors (a 0 size) included.
  std::map<std::string, Tensor> tensors;
  // Optimizer::state_tensors(): "global_step", "PARAM/step" (int64 scalars), "PARAM/NAME" (float32).
  std::map<std::string, Tensor> optimizer_state;
  // Section "predictor": SpecTrain's kept gradient averages (WeightMemory::prediction_state: "PARAM/average"
  // float32, "PARAM/observed" int64), for optimizers whose state holds no gradient estimate. Only a
  // pipeline that predicts reads them; other layouts resume without them.
  std::map<std::string, Tensor> predictor_state;
  // A manifest's shard files, relative to its directory (empty for a one-file checkpoint). read_checkpoint
  // of a manifest leaves the list here and the shards' union in tensors and optimizer_state.
  std::vector<std::string> shards;
  // How `onnxtrain export` writes the checkpoint's model as ONNX: {"model": the source model's absolute
  // path, "metadata": the written model's metadata_props, ...} (tools/export_command.cc). Informational:
  // never compared on resume; empty in checkpoints written before 2026-12-02.
  nlohmann::json export_info = nlohmann::json::object();
};

// The shard names of a checkpoint written by `ranks` ranks at `step`:
// "checkpoint-SSSSSSSS.otck.shards/rank-RRRRR.otck".
std::vector<std::string> shard_files(int64_t step, int ranks);
// Rank `rank` writes its part of step c.step (c.shards must be empty); returns the path. Atomic like
// write_checkpoint; no rotation (the manifest's write_checkpoint rotates whole steps).
std::string write_checkpoint_shard(const std::string& dir, const TrainingCheckpoint& c, int rank);
// The tensors rank `rank` of `ranks` writes of `all`: every ranks-th name from the rank-th (names sorted).
// The optimizer state entries "PARAM/..." go with PARAM; the entries of no tensor ("global_step", an fp16
// run's "loss_scaler/...") with rank 0.
void take_shard(const TrainingCheckpoint& all, int rank, int ranks, TrainingCheckpoint& shard);

// "checkpoint-00001200.otck" for step 1200.
std::string checkpoint_file_name(int64_t step);

// Writes DIR/checkpoint_file_name(c.step) atomically (see above; creates DIR when missing) and returns
// its path. Then keeps the `keep_last` checkpoints with the highest steps, never deleting the one just
// written, and deletes the others (keep_last 0: keeps all). Throws Error on I/O failures (disk full,
// permissions) and on tensors that cannot be stored (string/undefined dtype), leaving no temp file.
std::string write_checkpoint(const std::string& dir, const TrainingCheckpoint& c, int keep_last = 3);

// Reads and verifies a checkpoint (a manifest: and all its shards, see above). Throws Error (file set, see
// Error::in_file) saying what is wrong: "not an onnxtrain checkpoint", an unsupported format version, a truncated file,
// a header or tensor checksum mismatch (naming the tensor and its section), a bad header.
TrainingCheckpoint read_checkpoint(const std::string& path);

// The checkpoints in DIR by ascending step (file names only matched, contents not read). A missing DIR
// has none; temp files and other names are ignored.
struct CheckpointFile {
  int64_t step = 0;
  std::string path;
};
std::vector<CheckpointFile> list_checkpoints(const std::string& dir);
// The path of the highest-step checkpoint in DIR; nullopt when there is none (or DIR is missing).
std::optional<std::string> latest_checkpoint(const std::string& dir);

// Throws Error (file `path`) listing every parameter/state tensor that the model has and the checkpoint
// lacks, that the checkpoint has and the model lacks, or that has another dtype or shape there:
// "checkpoint does not match the model (1 missing, 0 extra, 1 with another dtype or shape): conv1.weight
// is float32 (8,1,3,3) there, float32 (16,1,3,3) in the model; in the model but not the checkpoint:
// fc.bias". Compares c.tensors only (Optimizer::load_state checks the optimizer state).
void check_checkpoint_matches(const TrainingCheckpoint& c, const std::map<std::string, Tensor>& model_tensors,
                              const std::string& path);
// check_checkpoint_matches, then copies each checkpoint tensor's bytes INTO the model's tensor (its
// buffer, which the graph shares), so the model resumes with the saved values.
void copy_checkpoint_tensors(const TrainingCheckpoint& c, std::map<std::string, Tensor>& model_tensors,
                             const std::string& path);
// Throws Error (file `path`) listing every top-level key of c.config whose value differs from
// `expected` (or is present in only one of them), except the keys in `ignore`:
// "checkpoint was written with other options ...: lr is 0.01 there, 0.1 here; ...".
void check_checkpoint_config(const TrainingCheckpoint& c, const nlohmann::json& expected, const std::string& path,
                             const std::vector<std::string>& ignore = {});

}  // namespace onnxtrain
