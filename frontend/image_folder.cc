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
// jerror.h after jpeglib.h, whose types it uses: the message codes (JWRN_JPEG_EOF).
#include <jerror.h>
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
  bool truncated = false;  // libjpeg's "Premature end of JPEG file" warning: it fills the rest with gray
};

void jpeg_error_exit(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// PIL's CMYK to RGB (Convert.c cmyk2rgb): each channel (255 - k) - c (255 - k) / 255, rounded as its
// MULDIV255. Files with an Adobe marker (Photoshop's, Pillow's) store the samples inverted, as PIL's
// "CMYK;I" reads them.
void cmyk_to_rgb(const unsigned char* cmyk, unsigned char* rgb, int64_t pixels, bool inverted) {
  const int flip = inverted ? 255 : 0;
  for (int64_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    const int not_k = 255 - (cmyk[3] ^ flip);
    int channel[3];
    for (int c = 0; c < 3; ++c) {
      const int product = (cmyk[c] ^ flip) * not_k + 128;
      channel[c] = std::clamp(not_k - (((product >> 8) + product) >> 8), 0, 255);
    }
    for (int c = 0; c < 3; ++c) rgb[c] = static_cast<unsigned char>(channel[c]);  // after reading: in place
  }
}

// Decodes into `out` as RGB; returns false with `errors.message` set when libjpeg fails.
bool decode_jpeg_into(const std::string& bytes, Image& out, JpegErrors& errors) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_error_exit;
  errors.manager.output_message = [](j_common_ptr) {};  // warnings (e.g. extraneous bytes) are not fatal
  // But a file that ends early is, as PIL's "image file is truncated" is: libjpeg would pad the missing
  // rows with gray and train on them.
  errors.manager.emit_message = [](j_common_ptr info, int level) {
    if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<JpegErrors*>(info->err)->truncated = true;
  };
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  // Gray and YCbCr come out as RGB; CMYK and YCCK (which libjpeg will not turn into RGB) as CMYK, which
  // cmyk_to_rgb converts as PIL does.
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  info.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&info);
  out.height = info.output_height, out.width = info.output_width, out.channels = info.output_components;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<size_t>(info.output_scanline) * out.width * out.channels;
    jpeg_read_scanlines(&info, &row, 1);
  }
  if (cmyk) {  // in place: pixel i's RGB lands at or before its CMYK
    cmyk_to_rgb(out.pixels.data(), out.pixels.data(), out.height * out.width, info.saw_Adobe_marker);
    out.channels = 3;
    out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return !errors.truncated;
}

Image decode_jpeg(const std::string& bytes, const std::string& path) {
  Image image;
  JpegErrors errors{};
  if (!decode_jpeg_into(bytes, image, errors)) {
    if (errors.truncated) throw Error("the JPEG image is truncated: the file ends early").in_file(path);
    throw Error(std::string("not a JPEG image libjpeg can decode: ") + errors.message).in_file(path);
  }
  return image;
}

// libpng's errors longjmp back to the decoder, as libjpeg's do; the message is kept for the exception.
struct PngReader {
  const std::string* bytes = nullptr;
  size_t offset = 0;
  std::string message;
};

void png_error_exit(png_structp png, png_const_charp message) {
  static_cast<PngReader*>(png_get_error_ptr(png))->message = message;
  png_longjmp(png, 1);
}

void png_read_from_memory(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (length > reader->bytes->size() - reader->offset) png_error(png, "the file ends early");
  std::memcpy(out, reader->bytes->data() + reader->offset, length);
  reader->offset += length;
}

// libpng's read structures, destroyed with the decoder.
struct PngDecoder {
  png_structp png = nullptr;
  png_infop info = nullptr;
  explicit PngDecoder(PngReader& reader) {
    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_error_exit, [](png_structp, png_const_charp) {});
    if (png != nullptr) info = png_create_info_struct(png);
  }
  ~PngDecoder() { png_destroy_read_struct(&png, &info, nullptr); }
};

// The header, and the transforms into 8-bit gray or RGB without alpha (16-bit gray stays 16-bit, in host
// order). False when libpng fails; nothing with a destructor lives between the setjmp and a longjmp.
bool png_read_header(PngDecoder& d, PngReader& reader, bool& gray16) {
  if (setjmp(png_jmpbuf(d.png))) return false;
  png_set_read_fn(d.png, &reader, png_read_from_memory);
  png_read_info(d.png, d.info);
  const int color = png_get_color_type(d.png, d.info), depth = png_get_bit_depth(d.png, d.info);
  gray16 = depth == 16 && color == PNG_COLOR_TYPE_GRAY;
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(d.png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(d.png);
  if (depth == 16 && !gray16) png_set_strip_16(d.png);
  if (gray16) png_set_swap(d.png);
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(d.png);
  png_set_interlace_handling(d.png);
  png_read_update_info(d.png, d.info);
  return true;
}

bool png_read_rows(PngDecoder& d, png_bytep* rows) {
  if (setjmp(png_jmpbuf(d.png))) return false;
  png_read_image(d.png, rows);
  png_read_end(d.png, nullptr);
  return true;
}

// Decodes as 8-bit RGB, as PIL's open and convert("RGB") do (torchvision's loader): palette and gray
// expanded, alpha dropped, no gamma correction (PIL ignores the gAMA, sRGB and iCCP chunks), 16-bit colour
// samples cut to their high byte, and 16-bit gray (PIL's mode I;16) clipped to 0..255 as PIL clips it.
// libpng's simplified API, used before, converted 16-bit and gAMA files through gamma curves: a 16-bit
// 0x1000 came out as 72, not 16.
bool decode_png_into(PngReader& reader, Image& out) {
  PngDecoder d(reader);
  bool gray16 = false;
  if (d.info == nullptr || !png_read_header(d, reader, gray16)) return false;
  out.height = png_get_image_height(d.png, d.info), out.width = png_get_image_width(d.png, d.info);
  const int channels = png_get_channels(d.png, d.info);  // 1 (gray) or 3
  const size_t row_bytes = png_get_rowbytes(d.png, d.info);
  std::vector<uint8_t> decoded(row_bytes * static_cast<size_t>(out.height));
  std::vector<png_bytep> rows(static_cast<size_t>(out.height));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = decoded.data() + y * row_bytes;
  if (!png_read_rows(d, rows.data())) return false;
  const auto pixels = static_cast<size_t>(out.height * out.width);
  out.channels = 3;
  out.pixels.resize(pixels * 3);
  for (size_t p = 0; p < pixels; ++p) {
    if (channels == 3) {
      std::copy_n(&decoded[3 * p], 3, &out.pixels[3 * p]);
      continue;
    }
    uint16_t value = decoded[p];
    if (gray16) {
      std::memcpy(&value, &decoded[2 * p], 2);
      value = std::min<uint16_t>(value, 255);
    }
    std::fill_n(&out.pixels[3 * p], 3, static_cast<uint8_t>(value));
  }
  return true;
}

Image decode_png(const std::string& bytes, const std::string& path) {
  Image image;
  PngReader reader{.bytes = &bytes};
  if (!decode_png_into(reader, image))
    throw Error("not a PNG image libpng can decode, or a damaged one: " + reader.message).in_file(path);
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
                              const std::vector<std::string>& classes, const std::string& whose) {
  ImageFolder folder;
  folder.class_names = classes.empty() ? image_folder_classes(dir) : classes;
  for (const std::string& name : image_folder_classes(dir)) {
    if (std::find(folder.class_names.begin(), folder.class_names.end(), name) == folder.class_names.end())
      throw Error("imagefolder: class folder '" + name + "' is not one of " + whose + " " +
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
        if (bytes.empty()) throw Error("an empty file (0 bytes), not an image").in_file(path);
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
