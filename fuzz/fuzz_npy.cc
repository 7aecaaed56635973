// The two .npy parsers: read_npy (a file: `onnxtrain run` inputs, npy:X,Y data, tokens:FILE.npy) and
// parse_npy_bytes (the members of an .npz, in memory).
#include "frontend/dataset_readers.h"
#include "frontend/npy.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  const std::string path = fuzz::write_input("input.npy", data, size);
  fuzz::expect_clean([&] { read_npy(path); });
  fuzz::expect_clean([&] { parse_npy_bytes(std::string(reinterpret_cast<const char*>(data), size), "member x.npy"); });
  return 0;
}
