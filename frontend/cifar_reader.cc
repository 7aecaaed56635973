// CIFAR-10 binary batches (www.cs.toronto.edu/~kriz/cifar.html): records of 1 label byte and 3072 pixel
// bytes (red, green, blue planes of 32×32), concatenated.
#include <cstring>

#include "frontend/dataset_readers.h"
#include "graph/error.h"

namespace onnxtrain {

RawDataset read_cifar10_batches(const std::vector<std::string>& paths) {
  constexpr int64_t kPixels = 3 * 32 * 32, kRecord = 1 + kPixels;
  std::vector<std::string> files;
  int64_t count = 0;
  for (const std::string& path : paths) {
    files.push_back(read_file_bytes(path));
    const auto size = static_cast<int64_t>(files.back().size());
    if (size == 0 || size % kRecord != 0) {
      const int64_t expected = (size / kRecord + 1) * kRecord;
      throw Error("truncated file: expected a multiple of " + std::to_string(kRecord) +
                  " bytes (records of 1 label byte + 3072 pixel bytes), e.g. " + std::to_string(expected) +
                  " bytes, got " + std::to_string(size))
          .in_file(path);
    }
    count += size / kRecord;
  }
  RawDataset raw{Tensor(DType::UInt8, {count, 3, 32, 32}), Tensor(DType::Int64, {count})};
  auto* pixels = reinterpret_cast<unsigned char*>(raw.inputs.raw());
  auto labels = raw.labels.data<int64_t>();
  int64_t row = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string& bytes = files[f];
    for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()) / kRecord; ++r, ++row) {
      labels[row] = static_cast<unsigned char>(bytes[r * kRecord]);
      if (labels[row] >= 10) {
        throw Error("label " + std::to_string(labels[row]) + " at index " + std::to_string(r) + ", expected < 10")
            .in_file(paths[f]);
      }
      std::memcpy(pixels + row * kPixels, bytes.data() + r * kRecord + 1, kPixels);
    }
  }
  return raw;
}

}  // namespace onnxtrain
