// Datasets and the data loader (frontend/dataset.h, frontend/data_loader.h). IDX and CIFAR files are
// written by the tests into a temp dir; the .npz fixtures come from tests/data/make_dataset_fixtures.py.
#include "frontend/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/data_loader.h"
#include "frontend/npy.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("onnxtrain_dataset_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

std::string big_endian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// IDX images (n, rows, cols) with pixel i = (7·i) % 256, and labels.
std::string idx_images(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string bytes = big_endian(0x803) + big_endian(n) + big_endian(rows) + big_endian(cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) bytes.push_back(static_cast<char>((7 * i) % 256));
  return bytes;
}
std::string idx_labels(const std::vector<int>& labels) {
  std::string bytes = big_endian(0x801) + big_endian(static_cast<uint32_t>(labels.size()));
  for (int l : labels) bytes.push_back(static_cast<char>(l));
  return bytes;
}

// The message of the Error that `load` throws (describe(): "FILE: MESSAGE"); fails when none is thrown.
template <typename F>
std::string error_of(F&& load) {
  try {
    load();
  } catch (const Error& e) {
    return e.describe();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

std::string fixture(const std::string& name) { return std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/" + name; }

TEST(IdxDataset, PlainAndGzipFilesLoadTheSameScaledImages) {
  TempDir dir;
  write_bytes(dir.file("images"), idx_images(4, 2, 3));
  write_bytes(dir.file("labels"), idx_labels({3, 0, 9, 1}));
  write_gzip(dir.file("images.gz"), idx_images(4, 2, 3));
  write_gzip(dir.file("labels.gz"), idx_labels({3, 0, 9, 1}));
  for (const std::string& suffix : {std::string(), std::string(".gz")}) {
    const Dataset d = load_dataset("idx:" + dir.file("images" + suffix) + "," + dir.file("labels" + suffix));
    EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{4, 1, 2, 3}));
    EXPECT_EQ(d.inputs.dtype(), DType::Float32);
    EXPECT_EQ(d.labels.to_int64(), (std::vector<int64_t>{3, 0, 9, 1}));
    EXPECT_EQ(d.classes, 10);  // max label + 1
    const auto x = d.inputs.data<float>();
    EXPECT_FLOAT_EQ(x[0], 0.0f);
    EXPECT_FLOAT_EQ(x[5], 35.0f / 255.0f);
    EXPECT_FLOAT_EQ(x[23], static_cast<float>((7 * 23) % 256) / 255.0f);
    EXPECT_NE(d.description.find("4 samples (1,2,3)"), std::string::npos) << d.description;
  }
}

TEST(IdxDataset, MnistDirectoryPicksTheSplit) {
  TempDir dir;
  write_gzip(dir.file("train-images-idx3-ubyte.gz"), idx_images(3, 2, 2));
  write_gzip(dir.file("train-labels-idx1-ubyte.gz"), idx_labels({1, 2, 3}));
  write_bytes(dir.file("t10k-images-idx3-ubyte"), idx_images(2, 2, 2));  // plain works as well
  write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx_labels({4, 5}));
  EXPECT_EQ(load_dataset("mnist:" + dir.file("")).size(), 3);
  const Dataset test = load_dataset("mnist:" + dir.file(""), {.split = "test"});
  EXPECT_EQ(test.labels.to_int64(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(test.classes, 10);
  EXPECT_NE(
      error_of([&] { load_dataset("mnist:" + dir.file(""), {.split = "validation"}); }).find("expected train or test"),
      std::string::npos);
}

TEST(IdxDataset, WrongMagicNumberNamesFileAndExpectedMagic) {
  TempDir dir;
  write_bytes(dir.file("labels"), idx_labels({1, 2}));
  const std::string message = error_of([&] { load_dataset("idx:" + dir.file("labels") + "," + dir.file("labels")); });
  EXPECT_EQ(message,
            dir.file("labels") + ": wrong magic number 0x00000801: expected 0x00000803 (IDX images, uint8, 3 dims)");
}

TEST(IdxDataset, TruncatedFileSaysExpectedAndActualBytes) {
  TempDir dir;
  std::string images = idx_images(2, 3, 3);  // 16 + 18 = 34 bytes
  images.pop_back();
  write_bytes(dir.file("images"), images);
  write_bytes(dir.file("labels"), idx_labels({1, 2}));
  EXPECT_EQ(error_of([&] { load_dataset("idx:" + dir.file("images") + "," + dir.file("labels")); }),
            dir.file("images") + ": truncated file: expected 34 bytes, got 33");
}

TEST(IdxDataset, TruncatedGzipStreamIsAnError) {
  TempDir dir;
  write_gzip(dir.file("full.gz"), idx_images(50, 28, 28));
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_bytes(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  write_bytes(dir.file("labels"), idx_labels(std::vector<int>(50, 1)));
  const std::string message = error_of([&] { load_dataset("idx:" + dir.file("cut.gz") + "," + dir.file("labels")); });
  EXPECT_EQ(message.rfind(dir.file("cut.gz") + ": truncated", 0), 0u) << message;
}

TEST(IdxDataset, LabelOutOfRangeNamesLabelIndexAndClassCount) {
  TempDir dir;
  write_bytes(dir.file("images"), idx_images(6, 2, 2));
  write_bytes(dir.file("labels"), idx_labels({0, 1, 2, 3, 4, 12}));
  EXPECT_EQ(error_of([&] { load_dataset("idx:" + dir.file("images") + "," + dir.file("labels"), {.classes = 10}); }),
            dir.file("labels") + ": label 12 at index 5, expected < 10 (or -100, ignored)");
  EXPECT_EQ(load_dataset("idx:" + dir.file("images") + "," + dir.file("labels")).classes, 13);
}

TEST(IdxDataset, DifferentImageAndLabelCountsAreAnError) {
  TempDir dir;
  write_bytes(dir.file("images"), idx_images(3, 2, 2));
  write_bytes(dir.file("labels"), idx_labels({1, 2}));
  const std::string message = error_of([&] { load_dataset("idx:" + dir.file("images") + "," + dir.file("labels")); });
  EXPECT_NE(message.find("counts of inputs and labels differ: 3 inputs in " + dir.file("images") +
                         " but labels (2) in " + dir.file("labels") + " (expected (3) or (3, T))"),
            std::string::npos)
      << message;
}

TEST(IdxDataset, MissingFileIsNamed) {
  TempDir dir;
  write_bytes(dir.file("labels"), idx_labels({1}));
  EXPECT_EQ(error_of([&] { load_dataset("idx:" + dir.file("nope") + "," + dir.file("labels")); }),
            dir.file("nope") + ": cannot open the file (missing?)");
}

TEST(FashionMnist, MissingInstallationHintsAtTheDebianPackage) {
  TempDir dir;
  ASSERT_EQ(setenv("ONNXTRAIN_FASHION_MNIST_DIR", dir.file("absent").c_str(), 1), 0);
  const std::string message = error_of([] { load_dataset("fashion-mnist"); });
  unsetenv("ONNXTRAIN_FASHION_MNIST_DIR");
  EXPECT_EQ(message.rfind(dir.file("absent") + "/train-images-idx3-ubyte.gz: Fashion-MNIST is not installed", 0), 0u)
      << message;
  EXPECT_NE(message.find("apt-get install dataset-fashion-mnist"), std::string::npos) << message;
}

TEST(FashionMnist, RealTrainAndTestSplitsLoad) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "/usr/share/datasets/fashion-mnist is absent (Debian package dataset-fashion-mnist not installed)";
  }
  const Dataset train = load_dataset("fashion-mnist");
  EXPECT_EQ(train.inputs.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(train.classes, 10);
  std::vector<int64_t> per_class(10, 0);
  for (int64_t l : train.labels.to_int64()) ++per_class.at(static_cast<std::size_t>(l));
  EXPECT_EQ(per_class, std::vector<int64_t>(10, 6000));  // Fashion-MNIST is balanced
  // The normalisation constants in dataset.cc are these statistics.
  const Dataset normalised = load_dataset("fashion-mnist", {.normalize = Normalization::MeanStd});
  double sum = 0, sum_sq = 0;
  for (float v : normalised.inputs.data<float>()) sum += v, sum_sq += double{v} * v;
  const double n = static_cast<double>(normalised.inputs.numel());
  EXPECT_NEAR(sum / n, 0.0, 1e-4);
  EXPECT_NEAR(sum_sq / n, 1.0, 1e-4);
  EXPECT_NE(normalised.description.find("mean 0.2860 std 0.3530 (training split)"), std::string::npos)
      << normalised.description;

  const Dataset test = load_dataset("fashion-mnist", {.split = "test"});
  EXPECT_EQ(test.inputs.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(test.classes, 10);
}

// CIFAR-10 records: label byte, then 3072 pixels; pixel p of record r = (r + p) % 256.
std::string cifar_records(const std::vector<int>& labels) {
  std::string bytes;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    bytes.push_back(static_cast<char>(labels[r]));
    for (int p = 0; p < 3072; ++p) bytes.push_back(static_cast<char>((r + p) % 256));
  }
  return bytes;
}

TEST(Cifar10Dataset, ReadsRecordsAsChannelPlanes) {
  TempDir dir;
  write_bytes(dir.file("test_batch.bin"), cifar_records({3, 9, 0}));
  const Dataset d = load_dataset("cifar10:" + dir.file(""), {.split = "test"});
  EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{3, 3, 32, 32}));
  EXPECT_EQ(d.labels.to_int64(), (std::vector<int64_t>{3, 9, 0}));
  EXPECT_EQ(d.classes, 10);
  const auto x = d.inputs.data<float>();
  EXPECT_FLOAT_EQ(x[1024], 0.0f);                   // record 0, green plane starts at pixel 1024 % 256 = 0
  EXPECT_FLOAT_EQ(x[3072 * 2 + 5], 7.0f / 255.0f);  // record 2, pixel 5
  const Dataset n = load_dataset("cifar10:" + dir.file(""), {.split = "test", .normalize = Normalization::MeanStd});
  EXPECT_FLOAT_EQ(n.inputs.data<float>()[1024 + 1], (1.0f / 255.0f - 0.4822f) / 0.2435f);
}

TEST(Cifar10Dataset, TrainSplitReadsFiveBatchesAndNamesAMissingOne) {
  TempDir dir;
  for (int b = 1; b <= 5; ++b) write_bytes(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_records({b}));
  EXPECT_EQ(load_dataset("cifar10:" + dir.file("")).labels.to_int64(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  fs::remove(dir.file("data_batch_4.bin"));
  EXPECT_EQ(error_of([&] { load_dataset("cifar10:" + dir.file("")); }),
            dir.file("") + "/data_batch_4.bin: cannot open the file (missing?)");
}

TEST(Cifar10Dataset, TruncatedFileAndBadLabelAreErrors) {
  TempDir dir;
  write_bytes(dir.file("test_batch.bin"), cifar_records({1, 2}).substr(0, 3073 + 100));
  EXPECT_EQ(error_of([&] { load_dataset("cifar10:" + dir.file(""), {.split = "test"}); }),
            dir.file("") +
                "/test_batch.bin: truncated file: expected a multiple of 3073 bytes (records of 1 label byte + "
                "3072 pixel bytes), e.g. 6146 bytes, got 3173");
  write_bytes(dir.file("test_batch.bin"), cifar_records({1, 2, 10}));
  EXPECT_EQ(error_of([&] { load_dataset("cifar10:" + dir.file(""), {.split = "test"}); }),
            dir.file("") + "/test_batch.bin: label 10 at index 2, expected < 10");
}

TEST(NpzDataset, StoredArchiveFromNumpySavez) {
  const Dataset d = load_dataset("npz:" + fixture("dataset_savez.npz"));
  EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{5, 1, 4, 4}));  // (N,H,W) gets C=1
  EXPECT_EQ(d.labels.to_int64(), (std::vector<int64_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(d.classes, 3);
  EXPECT_FLOAT_EQ(d.inputs.data<float>()[79], 79.0f / 255.0f);
}

TEST(NpzDataset, DeflatedArchiveFromNumpySavezCompressed) {
  const Dataset d = load_dataset("npz:" + fixture("dataset_savez_compressed.npz"));
  EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{6, 3}));  // features stay (N,F)
  EXPECT_EQ(d.labels.to_int64(), (std::vector<int64_t>{2, 1, 0, 2, 1, 0}));
  EXPECT_FLOAT_EQ(d.inputs.data<float>()[17], 1.7f);  // float inputs are not rescaled
}

TEST(NpzDataset, KerasLayoutPicksTheSplit) {
  const Dataset train = load_dataset("npz:" + fixture("dataset_keras_layout.npz"));
  EXPECT_EQ(train.inputs.sizes(), (std::vector<int64_t>{4, 1, 2, 2}));
  EXPECT_FLOAT_EQ(train.inputs.data<float>()[15], 15.0f / 16.0f);
  const Dataset test = load_dataset("npz:" + fixture("dataset_keras_layout.npz"), {.split = "test"});
  EXPECT_EQ(test.labels.to_int64(), (std::vector<int64_t>{0, 1}));
  EXPECT_FLOAT_EQ(test.inputs.data<float>()[1], 1.0f - 1.0f / 8.0f);
}

// The inputs and the labels are looked up each by its own list, as --x-key's and --y-key's help says: x
// with labels is found as x with y is (outside check, 2026-12-06: "expected arrays ... x and y", refused).
TEST(NpzDataset, InputsAndLabelsAreFoundEachByItsOwnNames) {
  const Dataset d = load_dataset("npz:" + fixture("dataset_x_labels.npz"));
  EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{3, 1, 2, 2}));
  EXPECT_FLOAT_EQ(d.inputs.data<float>()[11], 11.0f);
  EXPECT_EQ(d.labels.to_int64(), (std::vector<int64_t>{2, 1, 0}));
}

// 3-D float data is (N, H, W) images for a model of rank-4 input, which get their channel axis, and
// (N, T, F) sequences for a model that reads rank 3, which keep their shape (outside check, 2026-12-06:
// "(64,1,16,8) do not match the model input (batch,16,8)").
TEST(NpzDataset, ThreeDimensionalDataGetsAChannelAxisOnlyForAModelOfRankFour) {
  const std::string path = "npz:" + fixture("dataset_keras_layout.npz");
  EXPECT_EQ(load_dataset(path).inputs.sizes(), (std::vector<int64_t>{4, 1, 2, 2}));
  EXPECT_EQ(load_dataset(path, {.input_rank = 4}).inputs.sizes(), (std::vector<int64_t>{4, 1, 2, 2}));
  EXPECT_EQ(load_dataset(path, {.input_rank = 3}).inputs.sizes(), (std::vector<int64_t>{4, 2, 2}));
}

TEST(NpzDataset, MissingArraysAndTruncatedArchiveAreErrors) {
  EXPECT_EQ(error_of([] { load_dataset("npz:" + fixture("dataset_other_names.npz")); }),
            fixture("dataset_other_names.npz") +
                ": expected an array of inputs (x, inputs or x_train) and one of labels (labels, y or y_train), the "
                "archive holds: images, targets");
  TempDir dir;
  std::ifstream in(fixture("dataset_savez.npz"), std::ios::binary);
  const std::string zip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_bytes(dir.file("cut.npz"), zip.substr(0, zip.size() - 30));
  const std::string message = error_of([&] { load_dataset("npz:" + dir.file("cut.npz")); });
  EXPECT_EQ(message.rfind(dir.file("cut.npz") + ": truncated file", 0), 0u) << message;
  write_bytes(dir.file("not.npz"), "hello, not a zip archive at all");
  EXPECT_EQ(error_of([&] { load_dataset("npz:" + dir.file("not.npz")); }),
            dir.file("not.npz") + ": not an .npz file: expected a zip archive (magic PK\\3\\4)");
}

// --x-key/--y-key read arrays of any name; a missing one names the keys and what the archive holds.
TEST(NpzDataset, ArraysOfOtherNamesLoadByKey) {
  const Dataset d = load_dataset("npz:" + fixture("dataset_other_names.npz"), {.x_key = "images", .y_key = "targets"});
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.labels.data<int64_t>()[1], 1);
  // The data line's class histogram, and the classes without a sample when the model scores more.
  EXPECT_NE(d.description.find("; class counts 0:1 1:1"), std::string::npos) << d.description;
  const Dataset three =
      load_dataset("npz:" + fixture("dataset_other_names.npz"), {.classes = 3, .x_key = "images", .y_key = "targets"});
  EXPECT_NE(three.description.find("; class counts 0:1 1:1 2:0; 1 of 3 classes have no sample"), std::string::npos)
      << three.description;
  EXPECT_EQ(error_of([] { load_dataset("npz:" + fixture("dataset_other_names.npz"), {.x_key = "images"}); }),
            fixture("dataset_other_names.npz") +
                ": expected arrays images (--x-key) and y (--y-key), the archive holds: "
                "images, targets");
}

TEST(NpyDataset, PairOfNpyFiles) {
  TempDir dir;
  Tensor x(DType::Float32, {3, 2});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) - 2.5f;
  write_npy(dir.file("x.npy"), x);
  write_npy(dir.file("y.npy"), Tensor::vector_int64({1, 0, -1}));
  EXPECT_EQ(error_of([&] { load_dataset("npy:" + dir.file("x.npy") + "," + dir.file("y.npy")); }),
            dir.file("y.npy") + ": label -1 at index 2, expected >= 0 (or -100, ignored)");
  write_npy(dir.file("y.npy"), Tensor::vector_int64({1, 0, 1}));
  const Dataset d =
      load_dataset("npy:" + dir.file("x.npy") + "," + dir.file("y.npy"), {.normalize = Normalization::MeanStd});
  EXPECT_EQ(d.classes, 2);
  ASSERT_EQ(d.mean.size(), 1u);
  EXPECT_FLOAT_EQ(d.mean[0], 0.0f);
  EXPECT_FLOAT_EQ(d.std[0], std::sqrt(17.5f / 6.0f));  // population std of -2.5..2.5
  EXPECT_FLOAT_EQ(d.inputs.data<float>()[5], 2.5f / std::sqrt(17.5f / 6.0f));
}

// A channel of one value everywhere gets std 1, as an exactly representable one always did: the one-pass
// E[x²] - mean² gave 72/255 std 1.1e-7, so a later 73 became 35000 after normalisation (an outside check).
TEST(NpyDataset, AConstantChannelIsNotScaledByRoundingNoise) {
  TempDir dir;
  Tensor x(DType::Float32, {64, 2, 8, 8});  // 4096 values a channel: where the one-pass sums round
  float* v = x.data<float>().data();
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = (i / 64) % 2 == 0 ? 72.0f / 255 : static_cast<float>(i % 7);
  write_npy(dir.file("x.npy"), x);
  write_npy(dir.file("y.npy"), Tensor::vector_int64(std::vector<int64_t>(64, 0)));
  const Dataset d =
      load_dataset("npy:" + dir.file("x.npy") + "," + dir.file("y.npy"), {.normalize = Normalization::MeanStd});
  ASSERT_EQ(d.std.size(), 2u);
  EXPECT_EQ(d.mean[0], 72.0f / 255);
  EXPECT_EQ(d.std[0], 1.0f);
  EXPECT_GT(d.std[1], 1.0f);
}

// Beyond 4096 values a sample's label is the linear map of its means over runs of values (here pairs):
// a linear classifier on those means, fitted on the train split, predicts the test split well (356 of 400;
// 273 when the labels were the full map of the values).
TEST(SyntheticDataset, LargeSamplesAreLabelledFromMeansOverRunsAndLearnable) {
  constexpr int64_t kFeatures = 64 * 72, kMeans = kFeatures / 2, kTrain = 12000, kTest = 400;
  const Dataset fit = load_dataset("synthetic:1,64,72:2:12000", {.normalize = Normalization::None, .seed = 5});
  const Dataset test =
      load_dataset("synthetic:1,64,72:2:400", {.split = "test", .normalize = Normalization::None, .seed = 5});
  const auto means = [](const Dataset& d) {
    std::vector<double> m(static_cast<size_t>(d.inputs.sizes()[0] * kMeans));
    const float* x = d.inputs.data<float>().data();
    for (size_t i = 0; i < m.size(); ++i) m[i] = (x[2 * i] + x[2 * i + 1]) / 2.0 - 0.5;
    return m;
  };
  const std::vector<double> a = means(fit), t = means(test);
  std::vector<double> w(kMeans, 0.0);  // two classes: the sign of one score
  const auto guess = [&](const double* x) {
    double s = 0;
    for (int64_t f = 0; f < kMeans; ++f) s += w[f] * x[f];
    return s > 0 ? int64_t{1} : int64_t{0};
  };
  for (int epoch = 0; epoch < 8; ++epoch)
    for (int64_t n = 0; n < kTrain; ++n) {
      const double* x = a.data() + n * kMeans;
      const int64_t truth = fit.labels.data<int64_t>()[n];
      if (guess(x) == truth) continue;
      for (int64_t f = 0; f < kMeans; ++f) w[f] += truth == 1 ? x[f] : -x[f];
    }
  int64_t correct = 0;
  for (int64_t n = 0; n < kTest; ++n) correct += guess(t.data() + n * kMeans) == test.labels.data<int64_t>()[n];
  EXPECT_GE(correct, kTest * 8 / 10) << "test accuracy of a linear classifier on the pair means, out of " << kTest;
}

TEST(SyntheticDataset, ReproducibleFromTheSeedAndLearnable) {
  const Dataset a = load_dataset("synthetic:3,4,4:5:200", {.seed = 11});
  const Dataset b = load_dataset("synthetic:3,4,4:5:200", {.seed = 11});
  const Dataset c = load_dataset("synthetic:3,4,4:5:200", {.seed = 12});
  EXPECT_EQ(a.inputs.sizes(), (std::vector<int64_t>{200, 3, 4, 4}));
  EXPECT_EQ(a.classes, 5);
  EXPECT_EQ(a.labels.to_int64(), b.labels.to_int64());
  EXPECT_EQ(std::vector<float>(a.inputs.data<float>().begin(), a.inputs.data<float>().end()),
            std::vector<float>(b.inputs.data<float>().begin(), b.inputs.data<float>().end()));
  EXPECT_NE(a.labels.to_int64(), c.labels.to_int64());
  std::set<int64_t> used;
  for (int64_t l : a.labels.to_int64()) used.insert(l);
  EXPECT_EQ(used.size(), 5u);  // every class occurs
  // The test split has other inputs but the same map: a linear classifier (a multi-class perceptron with
  // a bias) fitted on the train split predicts the test split well, so the task is learnable.
  const Dataset t = load_dataset("synthetic:3,4,4:5:200", {.split = "test", .seed = 11});
  EXPECT_NE(t.inputs.data<float>()[0], a.inputs.data<float>()[0]);
  const Dataset fit = load_dataset("synthetic:3,4,4:5:2000", {.seed = 11});
  std::vector<double> w(5 * 49, 0.0);  // 48 features + bias per class
  const auto score = [&](const float* x, int64_t c) {
    double s = w[c * 49 + 48];
    for (int f = 0; f < 48; ++f) s += w[c * 49 + f] * x[f];
    return s;
  };
  const auto predict = [&](const float* x) {
    int64_t best = 0;
    for (int64_t c = 1; c < 5; ++c)
      if (score(x, c) > score(x, best)) best = c;
    return best;
  };
  for (int epoch = 0; epoch < 30; ++epoch)
    for (int64_t n = 0; n < 2000; ++n) {
      const float* x = fit.inputs.data<float>().data() + n * 48;
      const int64_t truth = fit.labels.data<int64_t>()[n], guess = predict(x);
      if (guess == truth) continue;
      for (int f = 0; f < 48; ++f) w[truth * 49 + f] += x[f], w[guess * 49 + f] -= x[f];
      w[truth * 49 + 48] += 1, w[guess * 49 + 48] -= 1;
    }
  int64_t correct = 0;
  for (int64_t n = 0; n < 200; ++n)
    correct += predict(t.inputs.data<float>().data() + n * 48) == t.labels.data<int64_t>()[n];
  EXPECT_GE(correct, 160) << "test accuracy of a linear classifier, out of 200";
  for (float v : a.inputs.data<float>()) ASSERT_TRUE(v >= 0.0f && v < 1.0f);
  EXPECT_EQ(load_dataset("synthetic").inputs.sizes(), (std::vector<int64_t>{1024, 1, 28, 28}));
  EXPECT_NE(error_of([] { load_dataset("synthetic:1,2:3"); }).find("expected synthetic:C,H,W:CLASSES:N"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { load_dataset("imagenet"); }).find("unknown dataset 'imagenet': expected one of fashion-mnist"),
      std::string::npos);
}

TEST(DatasetShape, MismatchWithModelInputIsNamed) {
  const Dataset d = load_dataset("synthetic:1,28,28:10:8");
  check_matches_model_input(d, "input", Shape({Dim::symbol("batch"), Dim(1), Dim(28), Dim(28)}));
  check_matches_model_input(d, "input", Shape({Dim(8), Dim(1), Dim::symbol("h"), Dim(28)}));
  EXPECT_EQ(error_of([&] {
              check_matches_model_input(d, "input", Shape({Dim::symbol("batch"), Dim(3), Dim(32), Dim(32)}));
            }),
            "dataset inputs (8,1,28,28) do not match the model input 'input' (batch,3,32,32)");
  EXPECT_EQ(error_of([&] {
              check_matches_model_input(d, "x", Shape({Dim::symbol("batch"), Dim(784)}));
            }),
            "dataset inputs (8,1,28,28) do not match the model input 'x' (batch,784)");
}

// A dataset whose sample i is the value i, so batches reveal which rows they hold.
Dataset numbered(int64_t n) {
  Dataset d;
  d.inputs = Tensor(DType::Float32, {n, 1});
  d.labels = Tensor(DType::Int64, {n});
  for (int64_t i = 0; i < n; ++i)
    d.inputs.data<float>()[i] = static_cast<float>(i), d.labels.data<int64_t>()[i] = i % 3;
  d.classes = 3;
  d.description = "numbered";
  return d;
}

std::vector<int64_t> rows_of(const Batch& b) {
  std::vector<int64_t> rows;
  for (float v : b.x.data<float>()) rows.push_back(static_cast<int64_t>(v));
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(b.y.data<int64_t>()[i], rows[i] % 3);
  return rows;
}

TEST(DataLoader, EverySampleOncePerEpochInASeededOrder) {
  const Dataset d = numbered(50);
  DataLoader a(d, {.batch = 7, .seed = 5});
  DataLoader same(d, {.batch = 7, .seed = 5});
  DataLoader other(d, {.batch = 7, .seed = 6});
  ASSERT_EQ(a.batches_per_epoch(), 8);  // 7 × 7 + 1
  std::vector<std::vector<int64_t>> epochs(2);
  for (int64_t step = 0; step < 16; ++step) {
    const Batch b = a.next();
    EXPECT_EQ(b.epoch, step / 8);
    EXPECT_EQ(b.index_in_epoch, step % 8);
    EXPECT_EQ(b.last_in_epoch, step % 8 == 7);
    EXPECT_EQ(b.x.sizes()[0], step % 8 == 7 ? 1 : 7);
    const std::vector<int64_t> rows = rows_of(b);
    EXPECT_EQ(rows, rows_of(same.next()));
    epochs[b.epoch].insert(epochs[b.epoch].end(), rows.begin(), rows.end());
  }
  EXPECT_EQ(a.position(), (LoaderPosition{2, 0}));
  for (const auto& order : epochs) {
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 50u);
    EXPECT_EQ(order.size(), 50u);
  }
  EXPECT_NE(epochs[0], epochs[1]);  // another order each epoch
  EXPECT_NE(epochs[0], other.epoch_order(0));
  EXPECT_EQ(epochs[0], a.epoch_order(0));
  std::vector<int64_t> identity(50);
  for (int64_t i = 0; i < 50; ++i) identity[i] = i;
  EXPECT_NE(epochs[0], identity);
  EXPECT_EQ(DataLoader(d, {.batch = 7, .shuffle = false}).epoch_order(3), identity);
}

// The hook makes every input tensor (on the prefetch thread): a GPU run's page-locked batches.
TEST(DataLoader, InputsComeFromTheAllocatorGiven) {
  const Dataset d = numbered(20);
  std::atomic<int> made{0};
  std::atomic<int> live{0};
  DataLoader plain(d, {.batch = 6, .seed = 3});
  {
    DataLoader hooked(d, {.batch = 6, .seed = 3, .allocate_input = [&](DType dtype, std::vector<int64_t> sizes) {
                            ++made;
                            Tensor storage(dtype, sizes);  // memory with a deleter of our own, as pinned_tensor's
                            ++live;
                            return Tensor::wrap(
                                dtype, std::move(sizes),
                                std::shared_ptr<std::byte>(storage.raw(), [&live, storage](std::byte*) { --live; }));
                          }});
    for (int step = 0; step < 4; ++step) {
      const Batch a = plain.next(), b = hooked.next();
      EXPECT_EQ(rows_of(a), rows_of(b)) << "the same rows, wherever their memory is";
      ASSERT_EQ(b.x.nbytes(), a.x.nbytes());
      EXPECT_EQ(std::memcmp(b.x.raw(), a.x.raw(), a.x.nbytes()), 0);
    }
    EXPECT_GE(made.load(), 4);
  }
  EXPECT_EQ(live.load(), 0) << "every batch's storage went back through its deleter";
}

TEST(DataLoader, SeekResumesTheSameBatchSequence) {
  const Dataset d = numbered(40);
  DataLoader reference(d, {.batch = 6, .seed = 9, .drop_last = true});
  ASSERT_EQ(reference.batches_per_epoch(), 6);  // 40 / 6, the last 4 dropped
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(rows_of(reference.next()));

  DataLoader resumed(d, {.batch = 6, .seed = 9, .drop_last = true});
  for (int i = 0; i < 3; ++i) resumed.next();  // the prefetch thread is now ahead; seek must discard that
  resumed.seek(1, 2);                          // batch 8 of the sequence
  EXPECT_EQ(resumed.position(), (LoaderPosition{1, 2}));
  for (int i = 8; i < 20; ++i) EXPECT_EQ(rows_of(resumed.next()), expected[i]) << "batch " << i;

  DataLoader synchronous(d, {.batch = 6, .seed = 9, .drop_last = true, .prefetch = false});
  synchronous.seek(2, 5);
  EXPECT_EQ(rows_of(synchronous.next()), expected[17]);
  EXPECT_NE(error_of([&] { synchronous.seek(0, 6); }).find("an epoch has 6 batches"), std::string::npos);
}

// Rows of a validation split (its inputs are the row numbers of numbered()/class_sorted()).
std::vector<int64_t> validation_rows(const DataLoader& loader) {
  std::vector<int64_t> rows;
  for (float v : loader.validation().inputs.data<float>()) rows.push_back(static_cast<int64_t>(v));
  return rows;
}

// n rows, labels sorted by class: rows [k*n/classes, (k+1)*n/classes) have label k (as many user files are).
Dataset class_sorted(int64_t n, int64_t classes) {
  Dataset d = numbered(n);
  for (int64_t i = 0; i < n; ++i) d.labels.data<int64_t>()[i] = i * classes / n;
  d.classes = classes;
  return d;
}

TEST(DataLoader, ValidationSplitIsSeededStratifiedAndDisjoint) {
  const Dataset d = numbered(100);  // labels i % 3: 34, 33, 33 rows
  DataLoader loader(d, {.batch = 16, .seed = 1, .validation_fraction = 0.2});
  EXPECT_EQ(loader.train_size(), 80);
  ASSERT_EQ(loader.validation().size(), 20);
  const std::vector<int64_t> held = validation_rows(loader);
  std::map<int64_t, int> per_class;
  for (std::size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(loader.validation().labels.data<int64_t>()[i], held[i] % 3) << "labels travel with their rows";
    ++per_class[held[i] % 3];
  }
  // 34*0.2 = 6.8, 33*0.2 = 6.6 twice: floors 6,6,6 and the 2 left over go to the largest remainders.
  EXPECT_EQ(per_class, (std::map<int64_t, int>{{0, 7}, {1, 7}, {2, 6}}));
  EXPECT_NE(held,
            std::vector<int64_t>({80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99}))
      << "not the last rows";

  std::set<int64_t> seen;
  for (int i = 0; i < 5; ++i)
    for (int64_t r : rows_of(loader.next())) seen.insert(r);
  EXPECT_EQ(seen.size(), 80u);
  for (int64_t r : held) EXPECT_EQ(seen.count(r), 0u) << "row " << r << " is held out and was trained on";

  DataLoader same(d, {.batch = 16, .seed = 1, .validation_fraction = 0.2});
  EXPECT_EQ(validation_rows(same), held) << "the same seed holds out the same rows";
  DataLoader other(d, {.batch = 16, .seed = 2, .validation_fraction = 0.2});
  EXPECT_NE(validation_rows(other), held) << "another seed draws other rows";

  EXPECT_NE(error_of([&] { DataLoader bad(d, {.validation_fraction = 1.0}); }).find("validation fraction"),
            std::string::npos);
  EXPECT_NE(error_of([&] { DataLoader bad(numbered(3), {.batch = 4, .drop_last = true}); }).find("no training batches"),
            std::string::npos);
}

// A class-sorted file: the old split (the last 10%) validated on one class only, and never trained on it.
TEST(DataLoader, ClassSortedRowsValidateAndTrainOnEveryClass) {
  const Dataset d = class_sorted(1000, 10);
  DataLoader loader(d, {.batch = 100, .seed = 4, .validation_fraction = 0.1});
  std::map<int64_t, int> validated, trained;
  for (int64_t label : loader.validation().labels.data<int64_t>()) ++validated[label];
  for (int i = 0; i < loader.batches_per_epoch(); ++i) {
    const Batch b = loader.next();  // kept: a range-for over a temporary's span would dangle
    for (int64_t label : b.y.data<int64_t>()) ++trained[label];
  }
  for (int64_t k = 0; k < 10; ++k) {
    EXPECT_EQ(validated[k], 10) << "class " << k;
    EXPECT_EQ(trained[k], 90) << "class " << k;
  }
}

TEST(DataLoader, NoValidationKeepsEveryRowInTheShuffle) {
  const Dataset d = numbered(50);
  DataLoader loader(d, {.batch = 50, .seed = 3});
  EXPECT_EQ(loader.validation().size(), 0);
  std::vector<int64_t> order = loader.epoch_order(0);
  std::sort(order.begin(), order.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(DataLoader, DestroyingWithAFullQueueDoesNotHang) {
  const Dataset d = numbered(1000);
  for (int i = 0; i < 20; ++i) {
    DataLoader loader(d, {.batch = 10, .seed = static_cast<uint64_t>(i)});
    if (i % 2) loader.next();
  }
}

}  // namespace

// ---- Token data: language models (issue 20) ----

// The bytes "abcdefghij" cut into windows of 3 with next-token labels: 9 usable transitions give 3 windows
// at offset 0; a seed whose offset is 0 reads a,b,c → b,c,d first.
TEST(TokenData, TextIsCutIntoWindowsWithNextTokenLabels) {
  TempDir dir;
  write_bytes(dir.file("t.txt"), "abcdefghij");
  const Dataset d = load_dataset("text:" + dir.file("t.txt"), {.seq_len = 3, .integer_inputs = true});
  EXPECT_EQ(d.inputs.dtype(), DType::Int64);
  EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(d.labels.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(d.per_position_labels());
  EXPECT_TRUE(d.hold_out_tail);
  EXPECT_EQ(d.classes, 256);
  const std::vector<int64_t> x = d.inputs.to_int64(), y = d.labels.to_int64();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_GE(x[i], 'a');
    EXPECT_EQ(y[i], x[i] + 1) << "label " << i << " is the next byte";
  }
  for (int64_t w = 1; w < 3; ++w) EXPECT_EQ(x[w * 3], x[(w - 1) * 3] + 3) << "windows follow each other in the stream";
}

// The window offset moves with the seed (cuts differ) and is reproducible.
TEST(TokenData, TheSeedDrawsTheWindowOffset) {
  TempDir dir;
  std::string text(1001, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i % 200);
  write_bytes(dir.file("t.txt"), text);
  std::set<int64_t> firsts;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const Dataset a = load_dataset("text:" + dir.file("t.txt"), {.seed = seed, .seq_len = 7, .integer_inputs = true});
    const Dataset b = load_dataset("text:" + dir.file("t.txt"), {.seed = seed, .seq_len = 7, .integer_inputs = true});
    EXPECT_EQ(a.inputs.to_int64(), b.inputs.to_int64());
    firsts.insert(a.inputs.to_int64()[0]);
  }
  EXPECT_GT(firsts.size(), 1u) << "every seed cut the stream at the same offset";
}

TEST(TokenData, NpyAndUint16BinStreams) {
  TempDir dir;
  Tensor ids(DType::Int32, {9});
  for (int i = 0; i < 9; ++i) ids.data<int32_t>()[i] = 1000 + i;
  write_npy(dir.file("ids.npy"), ids);
  const Dataset n = load_dataset("tokens:" + dir.file("ids.npy"), {.seq_len = 4, .integer_inputs = true});
  EXPECT_EQ(n.inputs.to_int64(), (std::vector<int64_t>{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007}));
  EXPECT_EQ(n.labels.to_int64(), (std::vector<int64_t>{1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008}));
  EXPECT_EQ(n.classes, 1009);
  std::string bin;
  for (int i = 0; i < 5; ++i) bin += std::string{static_cast<char>(i), '\x01'};  // 256 + i, little-endian
  write_bytes(dir.file("train.bin"), bin);
  const Dataset b = load_dataset("tokens:" + dir.file("train.bin"), {.seq_len = 4, .integer_inputs = true});
  EXPECT_EQ(b.inputs.to_int64(), (std::vector<int64_t>{256, 257, 258, 259}));
  EXPECT_EQ(b.labels.to_int64(), (std::vector<int64_t>{257, 258, 259, 260}));
}

TEST(TokenData, ErrorsNameTheFileAndWhatWasExpected) {
  TempDir dir;
  write_bytes(dir.file("t.txt"), "abc");
  EXPECT_EQ(
      error_of([&] { load_dataset("text:" + dir.file("t.txt"), {.integer_inputs = true}); }),
      dir.file("t.txt") + ": a token stream needs --seq-len T (the tokens per sample; the model's sequence length)");
  EXPECT_EQ(error_of([&] { load_dataset("text:" + dir.file("t.txt"), {.seq_len = 3, .integer_inputs = true}); }),
            dir.file("t.txt") + ": the stream has 3 tokens: too few for one window of --seq-len 3 plus its next token");
  write_bytes(dir.file("odd.bin"), "abc");
  EXPECT_EQ(error_of([&] { load_dataset("tokens:" + dir.file("odd.bin"), {.seq_len = 1, .integer_inputs = true}); }),
            dir.file("odd.bin") + ": a .bin token file holds little-endian uint16 ids, but its size (3 bytes) is odd");
  EXPECT_EQ(error_of([&] { load_dataset("text:" + dir.file("t.txt"), {.seq_len = 1}); }),
            dir.file("t.txt") +
                ": inputs are int64: expected uint8 pixels or float32/float64 (integer token ids need a "
                "model whose input is an integer type)");
  // A folder: an ifstream opens it and reads nothing, which was "the stream has 0 tokens".
  fs::create_directories(dir.file("texts"));
  EXPECT_EQ(error_of([&] { load_dataset("text:" + dir.file("texts"), {.seq_len = 3, .integer_inputs = true}); }),
            dir.file("texts") + ": is a folder; expected a file");
}

// An npz named after the model's input, with per-position labels where -100 is ignored and larger labels
// are named by row and position.
TEST(TokenData, NpzWithModelInputNameAndPerPositionLabels) {
  TempDir dir;
  const std::string good = fixture("dataset_tokens.npz"), bad = fixture("dataset_tokens_bad_label.npz");
  const Dataset d = load_dataset("npz:" + good, {.integer_inputs = true, .input_name = "input_ids"});
  EXPECT_EQ(d.inputs.dtype(), DType::Int64);
  EXPECT_EQ(d.inputs.sizes(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(d.labels.sizes(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(d.labels.to_int64()[1], kIgnoredLabel);
  EXPECT_EQ(d.classes, 50);
  EXPECT_EQ(
      error_of([&] { load_dataset("npz:" + bad, {.classes = 50, .integer_inputs = true, .input_name = "input_ids"}); }),
      bad + ": label 50 at row 2, position 3, expected < 50 (or -100, ignored)");
  const std::string message = error_of([&] { load_dataset("npz:" + good, {.input_name = "ids"}); });
  EXPECT_NE(message.find("expected an array of inputs (ids, x, inputs or x_train)"), std::string::npos) << message;
}

TEST(TokenData, ModelInputDtypeMustMatch) {
  Dataset d;
  d.inputs = Tensor(DType::Int64, {2, 8});
  d.labels = Tensor(DType::Int64, {2, 8});
  check_matches_model_input(d, "input_ids", Shape({Dim::symbol("batch"), Dim::symbol("seq")}), DType::Int64);
  EXPECT_EQ(error_of([&] {
              check_matches_model_input(d, "input", Shape({Dim::symbol("batch"), Dim(8)}));
            }),
            "dataset inputs are int64 but the model input 'input' is float32");
}

// Token streams validate on their tail; other per-position data on rows drawn by the seed.
TEST(DataLoader, TokenStreamsHoldOutTheirTail) {
  TempDir dir;
  std::string text(401, 'a');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i % 251);
  write_bytes(dir.file("t.txt"), text);
  const Dataset d = load_dataset("text:" + dir.file("t.txt"), {.seq_len = 4, .integer_inputs = true});
  ASSERT_EQ(d.size(), 100);
  DataLoader loader(d, {.batch = 8, .seed = 3, .validation_fraction = 0.1, .prefetch = false});
  const Dataset& val = loader.validation();
  ASSERT_EQ(val.size(), 10);
  EXPECT_EQ(val.labels.sizes(), (std::vector<int64_t>{10, 4}));
  const std::vector<int64_t> all = d.inputs.to_int64(), held = val.inputs.to_int64();
  EXPECT_EQ(held, std::vector<int64_t>(all.end() - 40, all.end())) << "validation is the last 10 windows";
  EXPECT_NE(val.description.find("held-out tail"), std::string::npos) << val.description;
  const Batch b = loader.next();
  EXPECT_EQ(b.y.sizes(), (std::vector<int64_t>{8, 4}));
  const std::vector<int64_t> bx = b.x.to_int64(), by = b.y.to_int64();
  for (size_t i = 0; i < bx.size(); ++i) EXPECT_EQ(by[i], (bx[i] + 1) % 251) << "labels travel with their inputs";
}

}  // namespace onnxtrain
