#include "tools/text_file.h"

#include "graph/atomic_file.h"

namespace onnxtrain::cli {

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, text, {.create_folders = true});
}

}  // namespace onnxtrain::cli
