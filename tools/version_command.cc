// `onnxtrain version`: what this build of onnxtrain was built with and what the machine offers.
#include <cstdio>

#include "executor/comm/comm_info.h"
#include "frontend/importer.h"
#include "kernels/backend_info.h"
#include "tools/commands.h"

namespace onnxtrain::cli {

void add_version_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("version",
                                     "Show the version, the supported opsets, and the compute and "
                                     "communication backends of this build");
  cmd->callback([] {
    std::printf("onnxtrain %s\n", kOnnxtrainVersion);
    std::printf("ONNX opsets: ai.onnx %d to %d (Debian's ONNX library checks up to %d; onnxtrain's schemas beyond)\n",
                kMinOpset, kMaxOpset, kOnnxLibraryMaxOpset);
    std::printf("%s", format_backend_info(query_backend_info()).c_str());
    for (const CommBackendInfo& b : comm_backends()) {
      std::printf("comm %-5s %s\n", b.name.c_str(),
                  b.compiled ? b.version.c_str() : ("not built: " + b.detail).c_str());
    }
  });
}

}  // namespace onnxtrain::cli
