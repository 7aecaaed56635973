// torchvision's ImageFolder layout: DIR/<class>/<image>, the classes in sorted order of their folder names
// (label k = the k-th name), the images of a class in sorted order of their file names. JPEG files are
// decoded by libjpeg-turbo, PNG files by libpng, both as 8-bit RGB (or gray for a 1-channel model), then
// resized to the model's (H, W). Other files are skipped, as ImageFolder skips them, and counted. As PIL's
// convert("RGB") (torchvision's loader), an alpha channel is dropped and gray images are replicated; a
// 1-channel model gets PIL's convert("L") luma, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
//
// The resize is PIL's BILINEAR (what torchvision's Resize does to PIL images): a triangle filter whose
// support widens by the scale when shrinking, so a downscaled image is averaged, not sampled.
#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "frontend/dataset_readers.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

// An 8-bit image with `channels` interleaved channels per pixel.
struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// libjpeg reports errors through a callback that must not return: it jumps back to the decoder with the
// message, which then throws (no C++ object lives between the setjmp and the longjmp).
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Decodes into `out` as RGB; returns false with `errors.message` set when libjpeg fails.
bool decode_jpeg_into(const std::string& bytes, Image& out, JpegErrors& errors) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_error_exit;
  errors.manager.output_message = [](j_common_ptr) {};  // warnings (e.g. extraneous bytes) are not fatal
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  info.out_color_space = JCS_RGB;  // from gray and YCbCr (CMYK and YCCK files are refused by libjpeg)
  jpeg_start_decompress(&info);
  out.height = info.output_height, out.width = info.output_width, out.channels = info.output_components;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<size_t>(info.output_scanline) * out.width * out.channels;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

Image decode_jpeg(const std::string& bytes, const std::string& path) {
  Image image;
  JpegErrors errors{};
  if (!decode_jpeg_into(bytes, image, errors))
    throw Error(std::string("not a JPEG image libjpeg can decode: ") + errors.message).in_file(path);
  return image;
}

// libpng's simplified API: palette, gray, 16-bit and interlaced files all come out as 8-bit RGBA (colours
// not premultiplied), whose alpha is then dropped.
Image decode_png(const std::string& bytes, const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()))
    throw Error(std::string("not a PNG image libpng can decode: ") + png.message).in_file(path);
  png.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, rgba.data(), 0, nullptr)) {
    const std::string message = png.message;
    png_image_free(&png);
    throw Error("the PNG image is damaged: " + message).in_file(path);
  }
  Image image{png.height, png.width, 3, std::vector<uint8_t>(rgba.size() / 4 * 3)};
  for (size_t p = 0; p < rgba.size() / 4; ++p) std::copy_n(&rgba[4 * p], 3, &image.pixels[3 * p]);
  return image;
}

// PIL's convert("L") of an RGB image.
Image luma(const Image& rgb) {
  Image gray{rgb.height, rgb.width, 1, std::vector<uint8_t>(rgb.pixels.size() / 3)};
  for (size_t p = 0; p < gray.pixels.size(); ++p) {
    const uint8_t* c = &rgb.pixels[3 * p];
    gray.pixels[p] = static_cast<uint8_t>((c[0] * 19595u + c[1] * 38470u + c[2] * 7471u + 0x8000u) >> 16);
  }
  return gray;
}

// One axis of PIL's BILINEAR resampling: for each output position, the weights of the input positions
// under a triangle of half-width max(1, in/out) centred on the output pixel's centre, normalised.
struct AxisWeights {
  std::vector<int64_t> first;         // per output position: the first input position weighed
  std::vector<std::vector<float>> w;  // its weights, for consecutive input positions
};

AxisWeights axis_weights(int64_t in, int64_t out) {
  AxisWeights a;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = std::max(1.0, scale);
  for (int64_t o = 0; o < out; ++o) {
    const double centre = (static_cast<double>(o) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(std::floor(centre - support)));
    const int64_t hi = std::min<int64_t>(in, static_cast<int64_t>(std::ceil(centre + support)));
    std::vector<float> w;
    double total = 0;
    for (int64_t i = lo; i < hi; ++i) {
      const double t = std::max(0.0, 1.0 - std::abs((static_cast<double>(i) + 0.5 - centre) / support));
      w.push_back(static_cast<float>(t));
      total += t;
    }
    for (float& v : w) v = static_cast<float>(v / total);
    a.first.push_back(lo);
    a.w.push_back(std::move(w));
  }
  return a;
}

// The image resized to (height, width), written planar (C, H, W) into `out` (image.channels == channels).
void resize_into(const Image& image, int64_t channels, int64_t height, int64_t width, uint8_t* out) {
  const AxisWeights across = axis_weights(image.width, width), down = axis_weights(image.height, height);
  const int64_t c_in = image.channels;
  // Resized along W first, rounded to 8 bits in between, as PIL does.
  std::vector<float> rows(static_cast<size_t>(image.height * width * c_in));
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < c_in; ++c) {
        float v = 0;
        for (size_t k = 0; k < across.w[x].size(); ++k)
          v += across.w[x][k] * image.pixels[static_cast<size_t>((y * image.width + across.first[x] + k) * c_in + c)];
        rows[static_cast<size_t>((y * width + x) * c_in + c)] = std::clamp(std::round(v), 0.0f, 255.0f);
      }
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x) {
        float v = 0;
        for (size_t k = 0; k < down.w[y].size(); ++k)
          v += down.w[y][k] * rows[static_cast<size_t>(((down.first[y] + k) * width + x) * c_in + c)];
        out[(c * height + y) * width + x] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw Error("imagefolder: not a folder (expected DIR/<class>/<image>.jpg|png)").in_file(dir);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

ImageFolder read_image_folder(const std::string& dir, int64_t channels, int64_t height, int64_t width,
                              const std::vector<std::string>& classes) {
  ImageFolder folder;
  folder.class_names = classes.empty() ? image_folder_classes(dir) : classes;
  for (const std::string& name : image_folder_classes(dir)) {
    if (std::find(folder.class_names.begin(), folder.class_names.end(), name) == folder.class_names.end())
      throw Error("imagefolder: class folder '" + name + "' is not one of the training split's " +
                  std::to_string(folder.class_names.size()) + " classes")
          .in_file(dir);
  }
  std::vector<std::pair<std::string, int64_t>> files;  // (path, label)
  for (size_t label = 0; label < folder.class_names.size(); ++label) {
    std::vector<fs::path> images;
    const fs::path class_dir = fs::path(dir) / folder.class_names[label];
    if (!fs::is_directory(class_dir)) continue;  // a test split without images of this class
    for (const auto& entry : fs::recursive_directory_iterator(class_dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = lower(entry.path().extension().string());
      if (ext == ".jpg" || ext == ".jpeg" || ext == ".png") {
        images.push_back(entry.path());
      } else {
        ++folder.skipped_files;
      }
    }
    // ImageFolder's order: sorted(os.walk(...)) sorts by folder path, then each folder's files by name.
    std::sort(images.begin(), images.end(), [](const fs::path& a, const fs::path& b) {
      return std::pair(a.parent_path().string(), a.filename().string()) <
             std::pair(b.parent_path().string(), b.filename().string());
    });
    for (const fs::path& path : images) files.emplace_back(path.string(), static_cast<int64_t>(label));
  }
  if (files.empty()) {
    throw Error("imagefolder: no .jpg, .jpeg or .png images in class folders (" +
                std::to_string(folder.class_names.size()) + " folders found; expected DIR/<class>/<image>)")
        .in_file(dir);
  }
  const auto count = static_cast<int64_t>(files.size());
  folder.data = {Tensor(DType::UInt8, {count, channels, height, width}), Tensor(DType::Int64, {count})};
  auto labels = folder.data.labels.data<int64_t>();
  uint8_t* pixels = reinterpret_cast<uint8_t*>(folder.data.inputs.raw());
  const int64_t per_image = channels * height * width;
  // Decoding is most of the time: the files are shared out among the machine's cores.
  std::atomic<int64_t> next{0};
  std::exception_ptr failed;
  std::mutex failure;
  auto work = [&] {
    for (int64_t i = next++; i < count; i = next++) {
      try {
        const std::string& path = files[static_cast<size_t>(i)].first;
        const std::string bytes = read_file_bytes(path);
        const bool png = bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89PNG", 4) == 0;
        const Image rgb = png ? decode_png(bytes, path) : decode_jpeg(bytes, path);
        const Image image = channels == 1 ? luma(rgb) : rgb;
        resize_into(image, channels, height, width, pixels + i * per_image);
        labels[i] = files[static_cast<size_t>(i)].second;
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure);
        if (!failed) failed = std::current_exception();
        next = count;
      }
    }
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < std::min(threads, count); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
  return folder;
}

}  // namespace onnxtrain
