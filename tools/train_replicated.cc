// `onnxtrain train --central-storage --strategy dp --replicas R`: R replica threads around one master
// copy of the weights and one optimizer (central_storage.h; the same result as --strategy dp, bit for bit).
// `onnxtrain train --strategy ps --servers S --replicas W [--ps-predict]`: W asynchronous workers
// against S parameter-server shards (parameter_server.h); the staleness report is printed at the end.
//
// Both are driven epoch by epoch like the other multi-batch trainers (run_epochs, train_epochs.h):
// progress, --metrics (with each push's staleness for ps), validation, the test pass, the written model.
// Checkpoints are not written yet (refused with --checkpoint-dir; SIGINT stops without one).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "executor/central_storage.h"
#include "executor/parameter_server.h"
#include "frontend/data_loader.h"
#include "frontend/importer.h"
#include "graph/error.h"
#include "tools/train_epochs.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

int run_replicated_training(const TrainOptions& o) {
  const bool ps = o.strategy == "ps";
  if (o.central_storage && o.strategy != "dp") {
    throw Error(
        "--central-storage goes with --strategy dp (the replicas share one master copy of the weights); got "
        "--strategy " +
        o.strategy);
  }
  if (!ps && (o.ps_predict || o.servers != 1)) {
    throw Error("--servers and --ps-predict go with --strategy ps; got --strategy " + o.strategy);
  }
  if (!o.checkpoint_dir.empty() || o.resume || !o.resume_from.empty()) {
    throw Error(
        "--checkpoint-dir and --resume work with --strategy single, dp and the pipeline strategies: checkpoints of "
        "central-storage and parameter-server runs are not written yet");
  }
  // Replica (worker) r on cuda:N+r; checked before the data is made, so a missing GPU is reported at once.
  const Device device = training_device(o, o.replicas, 0, "--replicas " + std::to_string(o.replicas));
  TrainingData data(o, device);
  const int64_t per_epoch = data.per_epoch, total_steps = data.total_steps;
  data.print_data_line(o);
  const std::string on_gpus =
      device.kind == DeviceKind::Cuda
          ? " on cuda:" + std::to_string(device.index) +
                (o.replicas > 1 ? "..cuda:" + std::to_string(device.index + o.replicas - 1) : std::string())
          : std::string();

  if (!ps) {
    CentralStorageTrainer trainer(
        data.model.graph, {.trainer = trainer_options(o, total_steps, device, data.train), .replicas = o.replicas});
    std::fprintf(stderr,
                 "training %s with central storage: %d replicas (threads%s), one master copy in host memory%s, %lld "
                 "epochs x %lld mini-batches of %lld\n",
                 o.model.c_str(), o.replicas, on_gpus.c_str(), step_summary(o).c_str(),
                 static_cast<long long>(o.epochs), static_cast<long long>(per_epoch), static_cast<long long>(o.batch));
    RunRole role{.step_by_step = true};
    role.print_report = [&] {
      print_loss_scale(trainer.loss_scaler());
      std::printf("%s", format_central_storage_report(trainer.report()).c_str());
    };
    role.report = [&] {
      const CentralStorageReport r = trainer.report();
      return nlohmann::json{{"kind", "central_storage"},
                            {"replicas", r.replicas},
                            {"steps", r.steps},
                            {"step_seconds", r.step_seconds},
                            {"replica_compute_seconds", r.replica_compute_seconds},
                            {"bytes_per_step", r.bytes_per_step()}};
    };
    return run_epochs(o, trainer, data, role);
  }
  // The shards' schedules count their own updates: one per mini-batch, as a one-device run's.
  ParameterServerTrainer trainer(data.model.graph, {.trainer = trainer_options(o, total_steps, device, data.train),
                                                    .servers = o.servers,
                                                    .workers = o.replicas,
                                                    .predict = o.ps_predict});
  std::fprintf(stderr,
               "training %s with a parameter server: %d shards in host memory, %d asynchronous workers%s%s%s, %lld "
               "epochs x %lld mini-batches of %lld\n",
               o.model.c_str(), o.servers, o.replicas, on_gpus.c_str(), o.ps_predict ? " with weight prediction" : "",
               step_summary(o).c_str(), static_cast<long long>(o.epochs), static_cast<long long>(per_epoch),
               static_cast<long long>(o.batch));
  RunRole role;
  role.print_report = [&] { std::printf("%s", format_parameter_server_report(trainer.report()).c_str()); };
  role.step_fields = [&](int64_t mini_batch, nlohmann::json& line) {
    const ParameterServerReport::Push& p = trainer.report().pushes.at(static_cast<size_t>(mini_batch));
    line["worker"] = p.worker;
    line["staleness"] = p.staleness;
    if (o.ps_predict) line["predicted_steps"] = p.predicted_steps;
  };
  role.report = [&] {
    const ParameterServerReport& r = trainer.report();
    return nlohmann::json{{"kind", "parameter_server"},
                          {"workers", r.workers},
                          {"servers", r.servers},
                          {"pushes", r.pushes.size()},
                          {"mean_staleness", r.mean_staleness()},
                          {"worker_compute_seconds", r.worker_compute_seconds()},
                          {"worker_exchange_seconds", r.worker_exchange_seconds()}};
  };
  return run_epochs(o, trainer, data, role);
}

}  // namespace onnxtrain::cli
