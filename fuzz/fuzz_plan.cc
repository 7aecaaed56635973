// The plan.json reader (read_plan, what `train --plan` reads): JSON, then the structure and the stage
// ranges the executor trusts.
#include "fuzz/fuzz_input.h"
#include "partitioner/plan_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  const std::string path = fuzz::write_input("plan.json", data, size);
  fuzz::expect_clean([&] { read_plan(path); });
  return 0;
}
