// imagefolder:DIR (frontend/image_folder.cc) against torchvision: the images of tests/data/imagefolder, in
// ImageFolder's order and labels, decoded and resized as torchvision's PIL loader and Resize((32, 32)) do
// (expected.npz, made by make_imagefolder_fixtures.py beside it), within one level of 8-bit rounding;
// the test split labelled by the training split's classes; damaged files named. And --augment
// (LoaderOptions::Augment): every augmented sample is its image shifted within the padding (black
// outside) and maybe mirrored, drawn again each epoch, the same at the same position.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <vector>

#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/dataset_readers.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

const std::string kFolder = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/imagefolder";

const Tensor& array(const NpzArchive& npz, const std::string& name) {
  const Tensor* t = npz.find(name);
  if (!t) throw Error("expected.npz has no " + name);
  return *t;
}

// The largest difference of two uint8 arrays of one shape, and how many elements differ at all.
std::pair<int, int64_t> differences(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  const auto* a = reinterpret_cast<const uint8_t*>(got.raw());
  const auto* b = reinterpret_cast<const uint8_t*>(want.raw());
  int worst = 0;
  int64_t differing = 0;
  for (int64_t i = 0; i < std::min(got.numel(), want.numel()); ++i) {
    worst = std::max(worst, std::abs(int(a[i]) - int(b[i])));
    differing += a[i] != b[i];
  }
  return {worst, differing};
}

TEST(ImageFolder, MatchesTorchvisionsLoaderAndResize) {
  const NpzArchive expected = read_npz(kFolder + "/expected.npz");
  const ImageFolder rgb = read_image_folder(kFolder + "/train", 3, 32, 32);
  EXPECT_EQ(rgb.class_names, (std::vector<std::string>{"ankle_boot", "bag"}));
  EXPECT_EQ(rgb.skipped_files, 1);  // notes.txt
  EXPECT_EQ(rgb.data.labels.to_int64(), array(expected, "train_labels").to_int64());
  // PIL resamples in fixed point (22 fractional bits): an element may land one level away.
  const auto [worst, differing] = differences(rgb.data.inputs, array(expected, "train_rgb"));
  EXPECT_LE(worst, 1);
  EXPECT_LT(differing, rgb.data.inputs.numel() / 20) << differing << " of " << rgb.data.inputs.numel() << " differ";
  const ImageFolder gray = read_image_folder(kFolder + "/train", 1, 32, 32);
  EXPECT_LE(differences(gray.data.inputs, array(expected, "train_gray")).first, 1);
}

// PNGs that are not 8-bit sRGB, as PIL reads them (tests/data/imagefolder_png_depths, made by the same
// script): 16-bit colour cut to its high byte, 16-bit gray clipped to 255, gAMA ignored. libpng's
// simplified API passed them through gamma curves (a 16-bit 0x1000 came out as 72; an outside check).
TEST(ImageFolder, SixteenBitAndGammaPngsAreReadAsPilReadsThem) {
  const std::string folder = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/imagefolder_png_depths";
  const ImageFolder rgb = read_image_folder(folder, 3, 8, 8);
  const auto [worst, differing] = differences(rgb.data.inputs, array(read_npz(folder + "/expected.npz"), "rgb"));
  EXPECT_EQ(worst, 0) << differing << " elements differ";
}

// CMYK JPEGs (Photoshop's, print workflows') were refused by libjpeg's RGB output; torchvision's loader
// converts them (a third outside check). Read as PIL's convert("RGB") reads them, exactly.
TEST(ImageFolder, CmykJpegsAreReadAsPilReadsThem) {
  const std::string folder = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/imagefolder_jpeg_cmyk";
  const ImageFolder rgb = read_image_folder(folder, 3, 8, 8);
  const auto [worst, differing] = differences(rgb.data.inputs, array(read_npz(folder + "/expected.npz"), "rgb"));
  EXPECT_EQ(worst, 0) << differing << " elements differ";
}

TEST(ImageFolder, TestSplitTakesTheTrainingClasses) {
  const Dataset val = load_dataset("imagefolder:" + kFolder, {.split = "test", .image_shape = {3, 32, 32}});
  const NpzArchive expected = read_npz(kFolder + "/expected.npz");
  EXPECT_EQ(val.labels.to_int64(), array(expected, "val_labels").to_int64());
  EXPECT_EQ(val.class_names, (std::vector<std::string>{"ankle_boot", "bag"}));
  EXPECT_FLOAT_EQ(val.input_scale, 1.0f / 255);  // uint8 pixels, scaled as every image source
  EXPECT_EQ(preprocessing_metadata(val).at("onnxtrain.class_names"), "[\"ankle_boot\", \"bag\"]");
  // A folder without train/ is one split: no test split, and the whole folder trains.
  EXPECT_THROW(load_dataset("imagefolder:" + kFolder + "/train", {.split = "test", .image_shape = {3, 32, 32}}), Error);
  EXPECT_EQ(load_dataset("imagefolder:" + kFolder + "/train", {.image_shape = {3, 32, 32}}).size(), 6);
  // The model's input size is needed.
  EXPECT_THROW(load_dataset("imagefolder:" + kFolder), Error);
}

TEST(ImageFolder, DamagedImagesAndUnknownClassesAreNamed) {
  const fs::path dir = fs::temp_directory_path() / ("onnxtrain_imagefolder_" + std::to_string(::getpid()));
  fs::create_directories(dir / "train" / "cat");
  fs::create_directories(dir / "val" / "dog");
  fs::copy_file(kFolder + "/train/bag/f.jpg", dir / "train" / "cat" / "good.jpg");
  fs::copy_file(kFolder + "/val/bag/h.png", dir / "val" / "dog" / "h.png");
  for (const std::string name : {"broken.jpg", "broken.png"}) {
    std::ofstream(dir / "train" / "cat" / name) << (name.ends_with(".png") ? "\x89PNG\r\n\x1a\n garbage" : "garbage");
    try {
      read_image_folder((dir / "train").string(), 3, 32, 32);
      FAIL() << name << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    fs::remove(dir / "train" / "cat" / name);
  }
  // An empty file, and a JPEG cut short, which libjpeg would pad with gray rows (PIL refuses it too).
  const std::string jpeg = read_file_bytes(kFolder + "/train/bag/f.jpg");
  for (const auto& [name, bytes, why] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"empty.png", "", "an empty file (0 bytes)"},
           {"cut.jpg", jpeg.substr(0, jpeg.size() / 2), "the JPEG image is truncated"}}) {
    std::ofstream(dir / "train" / "cat" / name, std::ios::binary) << bytes;
    try {
      read_image_folder((dir / "train").string(), 3, 32, 32);
      FAIL() << name << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name + ": " + why), std::string::npos) << e.what();
    }
    fs::remove(dir / "train" / "cat" / name);
  }
  try {
    load_dataset("imagefolder:" + dir.string(), {.split = "test", .image_shape = {3, 32, 32}});
    FAIL() << "a test class the training split lacks was labelled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'dog'"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// Every augmented sample is its image shifted by (dy, dx) within the padding, black outside, and mirrored
// or not: found by trying every such transform. The draws change from epoch to epoch and repeat at the
// same position.
TEST(Augment, CropsAndFlipsWithinThePaddingReproducibly) {
  Dataset data = load_dataset("synthetic:3,8,8:4:64", {.normalize = Normalization::MeanStd, .seed = 1});
  const int64_t pad = 2, c = 3, h = 8, w = 8;
  DataLoader plain(data, {.batch = 16, .shuffle = true, .seed = 5, .prefetch = false});
  DataLoader augmented(
      data,
      {.batch = 16, .shuffle = true, .seed = 5, .prefetch = false, .augment = {.crop_padding = pad, .flip = true}});
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const Batch before = plain.batch_at(epoch, 1), after = augmented.batch_at(epoch, 1);
    EXPECT_EQ(after.y.to_int64(), before.y.to_int64());
    for (int64_t s = 0; s < 16; ++s) {
      const float* in = before.x.data<float>().data() + s * c * h * w;
      const float* out = after.x.data<float>().data() + s * c * h * w;
      bool matched = false;
      for (int64_t dy = -pad; dy <= pad && !matched; ++dy)
        for (int64_t dx = -pad; dx <= pad && !matched; ++dx)
          for (bool flip : {false, true}) {
            bool same = true;
            for (int64_t k = 0; k < c && same; ++k)
              for (int64_t y = 0; y < h && same; ++y)
                for (int64_t x = 0; x < w && same; ++x) {
                  const int64_t sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
                  const float black = -data.mean[k] / data.std[k];
                  const float want = sy >= 0 && sy < h && sx >= 0 && sx < w ? in[(k * h + sy) * w + sx] : black;
                  same = out[(k * h + y) * w + x] == want;
                }
            if (same) {
              matched = true;
              seen.insert({dy, dx, flip});
              break;
            }
          }
      EXPECT_TRUE(matched) << "epoch " << epoch << " sample " << s << " is no crop or flip of its image";
    }
    const Batch again = augmented.batch_at(epoch, 1);
    EXPECT_EQ(std::memcmp(again.x.raw(), after.x.raw(), after.x.nbytes()), 0);
  }
  EXPECT_GT(seen.size(), 10u);  // 32 samples draw from 50 transforms
  // Not images: refused.
  Dataset vectors = load_dataset("synthetic:16:4:32", {});
  EXPECT_THROW(DataLoader(vectors, {.batch = 8, .augment = {.flip = true}}), Error);
}

}  // namespace
}  // namespace onnxtrain
