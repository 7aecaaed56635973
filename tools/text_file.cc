#include "tools/text_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "graph/error.h"

namespace onnxtrain::cli {
namespace fs = std::filesystem;

void write_text_file(const std::string& path, const std::string& text) {
  const fs::path out(path);
  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    if (!file || !(file << text) || !file.flush()) {
      fs::remove(temp, ec);
      throw Error(path + ": cannot write the file");
    }
  }
  fs::rename(temp, out, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw Error(path + ": cannot write the file: " + ec.message());
  }
}

}  // namespace onnxtrain::cli
