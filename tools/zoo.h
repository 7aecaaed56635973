// The zoo of `bench --zoo` and `simulate --zoo`: models/zoo/zoo.json lists the networks (name, input,
// default batch) that models/zoo/make_zoo.py exports to models/zoo/NAME.onnx.
//
//   for (const ZooModel& m : zoo_models("resnet18_32,vgg11_32", "")) use(m.path, m.batch);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace onnxtrain::cli {

struct ZooModel {
  std::string path;
  int64_t batch = 32;
};

// The zoo's folder: `given`, else $ONNXTRAIN_ZOO_DIR, else models/zoo here or beside the source tree the
// binary was built in (build/PRESET/tools/onnxtrain). Throws Error when none has zoo.json.
std::filesystem::path zoo_folder(const std::string& given);

// NAME,...: each network's file and default batch; throws Error for an unknown name, and for a missing
// file with the command that makes it.
std::vector<ZooModel> zoo_models(const std::string& names, const std::string& dir_given);

}  // namespace onnxtrain::cli
