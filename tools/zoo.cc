#include "tools/zoo.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "tools/bench_run.h"

namespace onnxtrain::cli {

namespace fs = std::filesystem;

std::filesystem::path zoo_folder(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("ONNXTRAIN_ZOO_DIR")) return env;
  if (fs::exists("models/zoo/zoo.json")) return "models/zoo";
  const fs::path beside = fs::path(self_executable()).parent_path() / "../../../models/zoo";
  if (fs::exists(beside / "zoo.json")) return beside.lexically_normal();
  throw Error("--zoo: cannot find models/zoo/zoo.json here or beside the build; give --zoo-dir DIR");
}

std::vector<ZooModel> zoo_models(const std::string& names, const std::string& dir_given) {
  const fs::path dir = zoo_folder(dir_given);
  std::ifstream in(dir / "zoo.json");
  const nlohmann::json zoo = nlohmann::json::parse(in, nullptr, false);
  if (zoo.is_discarded() || !zoo.contains("networks"))
    throw Error((dir / "zoo.json").string() + ": not the zoo's list");
  std::vector<ZooModel> models;
  std::string::size_type begin = 0;
  while (begin <= names.size()) {
    const std::string::size_type end = std::min(names.find(',', begin), names.size());
    const std::string name = names.substr(begin, end - begin);
    begin = end + 1;
    std::string known;
    const nlohmann::json* entry = nullptr;
    for (const auto& n : zoo["networks"]) {
      known += (known.empty() ? "" : ", ") + n.value("name", std::string());
      if (n.value("name", std::string()) == name) entry = &n;
    }
    if (!entry)
      throw Error("--zoo: no network '" + name + "' in " + (dir / "zoo.json").string() + " (known: " + known + ")");
    const fs::path file = dir / (name + ".onnx");
    if (!fs::exists(file)) {
      throw Error("--zoo " + name + ": " + file.string() + " is not there: generate it with " +
                  (dir / "make_zoo.py").string() + " " + name + " (needs PyTorch: tools/install-deps.sh --fixtures)");
    }
    models.push_back({file.string(), entry->value("batch", int64_t{32})});
  }
  return models;
}

}  // namespace onnxtrain::cli
