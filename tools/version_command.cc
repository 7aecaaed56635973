// `onnxtrain version`: what this build of onnxtrain was built with.
#include <cstdio>

#include "frontend/importer.h"
#include "tools/commands.h"

namespace onnxtrain::cli {

void add_version_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("version", "Show the version and the libraries and opsets this build supports");
  cmd->callback([] {
    std::printf("onnxtrain 0.1.0\n");
    std::printf("ONNX opsets: ai.onnx %d to %d (ONNX library checks up to %d)\n", kMinOpset, kMaxOpset,
                kOnnxLibraryMaxOpset);
  });
}

}  // namespace onnxtrain::cli
