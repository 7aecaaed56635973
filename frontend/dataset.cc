#include "frontend/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "frontend/dataset_readers.h"
#include "frontend/npy.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// What a source reader hands to load_dataset before scaling, checks and normalisation.
struct LoadedData {
  Tensor inputs, labels;  // inputs uint8 or float; labels any integer dtype
  int64_t classes = 0;    // 0: from options.classes or max label + 1
  std::string source, images_file, labels_file;
  std::vector<float> train_mean, train_std;  // known statistics of the training split
  NamedTensors extra_inputs;                 // npz: DatasetOptions::extra_inputs, as stored
  std::vector<std::string> class_names;      // imagefolder: label k's folder name
};

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t p; (p = text.find(separator, start)) != std::string::npos; start = p + 1)
    parts.push_back(text.substr(start, p - start));
  parts.push_back(text.substr(start));
  return parts;
}

bool is_test_split(const DatasetOptions& options) {
  if (options.split != "train" && options.split != "test") {
    throw Error("unknown split '" + options.split + "': expected train or test");
  }
  return options.split == "test";
}

// DIR/NAME.gz when it exists, else DIR/NAME (the error for a missing file names the .gz).
std::string idx_file(const std::string& dir, const std::string& name) {
  const std::string gz = dir + "/" + name + ".gz";
  return std::filesystem::exists(gz) || !std::filesystem::exists(dir + "/" + name) ? gz : dir + "/" + name;
}

LoadedData load_idx_pair(const std::string& images, const std::string& labels, const std::string& source) {
  LoadedData d{read_idx_images(images), read_idx_labels(labels)};
  d.source = source;
  d.images_file = images;
  d.labels_file = labels;
  return d;
}

LoadedData load_mnist_dir(const std::string& dir, const DatasetOptions& options, const std::string& name) {
  const std::string prefix = is_test_split(options) ? "t10k" : "train";
  return load_idx_pair(idx_file(dir, prefix + "-images-idx3-ubyte"), idx_file(dir, prefix + "-labels-idx1-ubyte"),
                       name + " " + options.split + " from " + dir);
}

LoadedData load_fashion_mnist(const std::string& args, const DatasetOptions& options) {
  if (!args.empty()) throw Error("fashion-mnist takes no argument: use mnist:DIR for IDX files elsewhere");
  const char* override_dir = std::getenv("ONNXTRAIN_FASHION_MNIST_DIR");
  const std::string dir = override_dir && *override_dir ? override_dir : kFashionMnistDir;
  const std::string probe = dir + "/train-images-idx3-ubyte.gz";
  if (!std::filesystem::exists(probe)) {
    throw Error("Fashion-MNIST is not installed: expected its IDX files in " + dir +
                " (install Debian's dataset-fashion-mnist: apt-get install dataset-fashion-mnist, or use "
                "--data mnist:DIR / idx:IMAGES,LABELS)")
        .in_file(probe);
  }
  LoadedData d = load_mnist_dir(dir, options, "fashion-mnist");
  d.classes = 10;
  d.train_mean = {0.2860406f};  // computed over the 60000 training images scaled to [0,1]
  d.train_std = {0.3530242f};
  return d;
}

LoadedData load_mnist(const std::string& dir, const DatasetOptions& options) {
  LoadedData d = load_mnist_dir(dir, options, "mnist");
  d.classes = 10;
  return d;
}

LoadedData load_idx(const std::string& args, const DatasetOptions&) {
  const std::vector<std::string> files = split_on(args, ',');
  if (files.size() != 2) throw Error("idx data: expected idx:IMAGES,LABELS, got 'idx:" + args + "'");
  return load_idx_pair(files[0], files[1], "idx " + files[0]);
}

LoadedData load_cifar10(const std::string& dir_arg, const DatasetOptions& options) {
  std::string dir = dir_arg;
  if (std::filesystem::is_directory(dir + "/cifar-10-batches-bin")) dir += "/cifar-10-batches-bin";
  std::vector<std::string> paths;
  if (is_test_split(options)) {
    paths.push_back(dir + "/test_batch.bin");
  } else {
    for (int b = 1; b <= 5; ++b) paths.push_back(dir + "/data_batch_" + std::to_string(b) + ".bin");
  }
  RawDataset raw = read_cifar10_batches(paths);
  LoadedData d{raw.inputs, raw.labels, 10, "cifar10 " + options.split + " from " + dir, paths[0], paths[0]};
  d.train_mean = {0.4914f, 0.4822f, 0.4465f};  // population statistics of the 50000 training images
  d.train_std = {0.2470f, 0.2435f, 0.2616f};
  return d;
}

// imagefolder:DIR. DIR/<class>/<image> is a training split alone; DIR/train/<class>/... with DIR/val (or
// DIR/test) has both, the test split labelled by the training split's classes.
LoadedData load_image_folder(const std::string& dir, const DatasetOptions& options) {
  if (options.image_shape.size() != 3) {
    throw Error("imagefolder: the model's input has no static (C, H, W) size to decode and resize the images to")
        .in_file(dir);
  }
  const int64_t channels = options.image_shape[0];
  if (channels != 1 && channels != 3)
    throw Error("imagefolder: the model reads " + std::to_string(channels) +
                " channels; images give 1 (gray) or 3 (RGB)");
  const bool split_folders = std::filesystem::is_directory(dir + "/train");
  std::string folder = split_folders ? dir + "/train" : dir;
  std::vector<std::string> classes = options.class_names;
  std::string whose = "the model's";
  if (is_test_split(options)) {
    if (!split_folders)
      throw Error("imagefolder: no test split: expected DIR/train with DIR/val or DIR/test beside it").in_file(dir);
    if (classes.empty()) classes = image_folder_classes(folder), whose = "the training split's";
    folder = std::filesystem::is_directory(dir + "/val") ? dir + "/val" : dir + "/test";
  }
  ImageFolder images =
      read_image_folder(folder, channels, options.image_shape[1], options.image_shape[2], classes, whose);
  const auto count = std::to_string(images.data.labels.numel());
  LoadedData d{images.data.inputs,
               images.data.labels,
               static_cast<int64_t>(images.class_names.size()),
               "imagefolder " + folder + " (" + count + " images resized to " + std::to_string(options.image_shape[1]) +
                   "x" + std::to_string(options.image_shape[2]) +
                   (images.skipped_files ? ", " + std::to_string(images.skipped_files) + " other files skipped" : "") +
                   ")",
               folder,
               folder};
  d.class_names = std::move(images.class_names);
  return d;
}

// A model with several data inputs reads an array per input, named after it, and `labels`.
LoadedData load_npz_named_inputs(const NpzArchive& archive, const std::string& path, const DatasetOptions& options) {
  std::vector<std::string> wanted{options.input_name};
  for (const DatasetOptions::ExtraInput& extra : options.extra_inputs) wanted.push_back(extra.name);
  wanted.push_back("labels");
  std::string missing, names;
  for (const std::string& name : wanted)
    if (!archive.find(name)) missing += (missing.empty() ? "" : ", ") + name;
  if (!missing.empty()) {
    for (const std::string& n : archive.names) names += (names.empty() ? "" : ", ") + n;
    std::string all;
    for (const std::string& name : wanted) all += (all.empty() ? "" : ", ") + name;
    throw Error("the model reads several data inputs: expected an array for each, and labels (" + all + "); missing " +
                missing + "; the archive holds: " + (names.empty() ? "no .npy members" : names))
        .in_file(path);
  }
  LoadedData d{*archive.find(options.input_name), *archive.find("labels"), 0, "npz " + path, path, path};
  for (const DatasetOptions::ExtraInput& extra : options.extra_inputs)
    d.extra_inputs.emplace_back(extra.name, *archive.find(extra.name));
  return d;
}

LoadedData load_npz(const std::string& path, const DatasetOptions& options) {
  const NpzArchive archive = read_npz(path);
  if (!options.extra_inputs.empty()) return load_npz_named_inputs(archive, path, options);
  if (!options.x_key.empty() || !options.y_key.empty()) {
    const std::string x = options.x_key.empty() ? "x" : options.x_key, y = options.y_key.empty() ? "y" : options.y_key;
    if (archive.find(x) && archive.find(y)) return {*archive.find(x), *archive.find(y), 0, "npz " + path, path, path};
    std::string names;
    for (const std::string& n : archive.names) names += (names.empty() ? "" : ", ") + n;
    throw Error("expected arrays " + x + " (--x-key) and " + y +
                " (--y-key), the archive holds: " + (names.empty() ? "no .npy members" : names))
        .in_file(path);
  }
  // The inputs and the labels are looked up each by its own list (the model input's name, x, inputs,
  // x_train/x_test; labels, y, y_train/y_test): an archive of x and labels is as good as one of x and y.
  const std::string suffix = is_test_split(options) ? "_test" : "_train";
  std::vector<std::string> input_keys{"x", "inputs", "x" + suffix};
  if (!options.input_name.empty()) input_keys.insert(input_keys.begin(), options.input_name);
  const std::vector<std::string> label_keys{"labels", "y", "y" + suffix};
  const auto first_found = [&](const std::vector<std::string>& keys) -> const Tensor* {
    for (const std::string& key : keys)
      if (const Tensor* a = archive.find(key)) return a;
    return nullptr;
  };
  const Tensor* inputs = first_found(input_keys);
  const Tensor* labels = first_found(label_keys);
  if (inputs && labels) return {*inputs, *labels, 0, "npz " + path, path, path};
  std::string names;
  for (const std::string& n : archive.names) names += (names.empty() ? "" : ", ") + n;
  const auto listed = [](const std::vector<std::string>& keys) {
    std::string text;
    for (size_t i = 0; i < keys.size(); ++i) text += (i == 0 ? "" : i + 1 == keys.size() ? " or " : ", ") + keys[i];
    return text;
  };
  throw Error("expected an array of inputs (" + listed(input_keys) + ") and one of labels (" + listed(label_keys) +
              "), the archive holds: " + (names.empty() ? "no .npy members" : names))
      .in_file(path);
}

LoadedData load_npy_pair(const std::string& args, const DatasetOptions&) {
  const std::vector<std::string> files = split_on(args, ',');
  if (files.size() != 2) throw Error("npy data: expected npy:X.npy,Y.npy, got 'npy:" + args + "'");
  return {read_npy(files[0]), read_npy(files[1]), 0, "npy " + files[0], files[0], files[1]};
}

LoadedData load_synthetic(const std::string& args, const DatasetOptions& options) {
  const std::string spec = args.empty() ? "1,28,28:10:1024" : args;
  const std::vector<std::string> parts = split_on(spec, ':');
  std::vector<int64_t> shape;
  int64_t classes = 0, count = 0;
  try {
    if (parts.size() != 3) throw std::invalid_argument("parts");
    for (const std::string& s : split_on(parts[0], ',')) shape.push_back(std::stoll(s));
    classes = std::stoll(parts[1]);
    count = std::stoll(parts[2]);
  } catch (const std::logic_error&) {
    throw Error(
        "synthetic data: expected synthetic:C,H,W:CLASSES:N (e.g. synthetic:1,28,28:10:1024), or "
        "synthetic:T:VOCAB:N for a model that reads token ids, got 'synthetic:" +
        spec + "'");
  }
  if (options.integer_inputs) {
    if (shape.size() != 1) {
      throw Error("synthetic token ids: expected synthetic:T:VOCAB:N (T ids per sample), got 'synthetic:" + spec + "'");
    }
    RawDataset raw = make_synthetic_tokens(shape[0], classes, count, options.seed, is_test_split(options));
    return {raw.inputs, raw.labels,
            classes,    "synthetic token ids " + options.split + " (seed " + std::to_string(options.seed) + ")",
            "",         ""};
  }
  RawDataset raw = make_synthetic(shape, classes, count, options.seed, is_test_split(options));
  return {raw.inputs, raw.labels,
          classes,    "synthetic " + options.split + " (seed " + std::to_string(options.seed) + ")",
          "",         ""};
}

LoadedData load_token_source(const std::string& path, const DatasetOptions& options, TokenFormat format) {
  const std::vector<int64_t> stream = read_token_stream(path, format);
  RawDataset raw = token_windows(stream, options.seq_len, options.seed, path);
  const char* kind = format == TokenFormat::TextBytes ? "text" : "tokens";
  LoadedData d{raw.inputs,
               raw.labels,
               format == TokenFormat::TextBytes ? 256 : 0,
               std::string(kind) + " " + path + " (" + std::to_string(stream.size()) + " tokens, windows of " +
                   std::to_string(options.seq_len) + ")",
               path,
               path};
  return d;
}

// The spec prefixes load_dataset knows, in one table.
struct DataSource {
  const char* prefix;  // "fashion-mnist" matches the whole spec; the others take "PREFIX:ARGS"
  std::function<LoadedData(const std::string&, const DatasetOptions&)> load;
};
const std::vector<DataSource>& data_sources() {
  static const std::vector<DataSource> sources = {
      {"fashion-mnist", load_fashion_mnist},
      {"mnist", load_mnist},
      {"idx", load_idx},
      {"cifar10", load_cifar10},
      {"imagefolder", load_image_folder},
      {"npz", load_npz},
      {"npy", load_npy_pair},
      {"synthetic", load_synthetic},
      {"tokens",
       [](const std::string& a, const DatasetOptions& o) { return load_token_source(a, o, TokenFormat::Ids); }},
      {"text",
       [](const std::string& a, const DatasetOptions& o) { return load_token_source(a, o, TokenFormat::TextBytes); }},
  };
  return sources;
}

// Integer ids for a model that reads them: int64 (N, ...), values as they are.
Tensor inputs_as_ids(const Tensor& raw, const std::string& file) {
  if (!is_integer(raw.dtype())) {
    throw Error("inputs are " + std::string(dtype_name(raw.dtype())) +
                ", but the model reads integer ids: expected an integer array")
        .in_file(file);
  }
  if (raw.rank() < 2) throw Error("inputs have rank " + std::to_string(raw.rank()) + ": expected (N, T)").in_file(file);
  if (raw.dtype() == DType::Int64) return raw;
  const std::vector<int64_t> values = raw.to_int64();
  Tensor x(DType::Int64, raw.sizes());
  std::copy(values.begin(), values.end(), x.data<int64_t>().begin());
  return x;
}

// One NaN or infinite input value turns every weight it reaches into NaN at the first step that reads
// its row: refused on load, naming the row (float64 values beyond float32's range count as infinite).
void check_finite_inputs(const Tensor& x, const std::string& file) {
  const auto values = x.data<float>();
  const auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return;
  const int64_t row_size = x.rank() > 0 && x.sizes()[0] > 0 ? x.numel() / x.sizes()[0] : 1;
  const int64_t at = bad - values.begin();
  const int64_t bad_values = std::count_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  throw Error("row " + std::to_string(at / row_size) + " of the inputs holds " +
              (std::isnan(*bad) ? "NaN" : "an infinity") + " (element " + std::to_string(at % row_size) +
              " of the row; " + std::to_string(bad_values) +
              " non-finite values in all): training on it would make the weights NaN; fix or drop those rows")
      .in_file(file);
}

Tensor inputs_as_float(const Tensor& raw, const std::string& file, int64_t model_rank = 0) {
  Tensor x(DType::Float32, raw.sizes());
  auto out = x.data<float>();
  if (raw.dtype() == DType::UInt8) {
    const auto* in = reinterpret_cast<const unsigned char*>(raw.raw());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(in[i]) / 255.0f;
  } else if (raw.dtype() == DType::Float32) {
    x = raw;
  } else if (raw.dtype() == DType::Float64) {
    auto in = raw.data<double>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(in[i]);
  } else {
    throw Error("inputs are " + std::string(dtype_name(raw.dtype())) + ": expected uint8 pixels or float32/float64 " +
                (raw.dtype() == DType::Float16 ? "(save float16 data as float32: x.astype(np.float32))"
                                               : "(integer token ids need a model whose input is an integer type)"))
        .in_file(file);
  }
  if (x.rank() < 2) throw Error("inputs have rank " + std::to_string(x.rank()) + ": expected (N, ...)").in_file(file);
  if (raw.dtype() != DType::UInt8) check_finite_inputs(x, file);
  if (x.rank() == 3 && model_rank != 3)
    x = x.reshaped({x.sizes()[0], 1, x.sizes()[1], x.sizes()[2]});  // (N,H,W) → (N,1,H,W)
  return x;
}

// A model's other data input (an attention mask, a per-sample index, a flag) in the dtype the model reads:
// bool from a bool or an integer 0/1 array, integers from any integer array, float32 from a float (or
// uint8 pixel) array. One value per sample (N) or any (N, ...).
Tensor extra_input_as(const Tensor& raw, DType model_dtype, const std::string& where) {
  if (raw.rank() < 1) throw Error("the array is a scalar: expected one row per sample, (N, ...)").in_file(where);
  const std::string given(dtype_name(raw.dtype()));
  if (model_dtype == DType::Bool || is_integer(model_dtype)) {
    if (!is_integer(raw.dtype()) && raw.dtype() != DType::Bool) {
      throw Error("the array is " + given + ", but the model's input is " + std::string(dtype_name(model_dtype)) +
                  ": expected a bool or integer array")
          .in_file(where);
    }
    if (raw.dtype() == model_dtype) return raw;
    const std::vector<int64_t> values = raw.to_int64();
    Tensor t(model_dtype, raw.sizes());
    for (size_t i = 0; i < values.size(); ++i) {
      if (model_dtype == DType::Bool)
        reinterpret_cast<uint8_t*>(t.raw())[i] = values[i] != 0;
      else if (model_dtype == DType::Int32)
        t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
      else if (model_dtype == DType::Int64)
        t.data<int64_t>()[i] = values[i];
      else
        throw Error("the model's input is " + std::string(dtype_name(model_dtype)) + ": expected bool, int32 or int64")
            .in_file(where);
    }
    return t;
  }
  if (raw.rank() == 1) return inputs_as_float(raw.reshaped({raw.sizes()[0], 1}), where).reshaped(raw.sizes());
  return inputs_as_float(raw, where, raw.rank());
}

// int64 labels (N), or (N, T) one per position, checked against the count of inputs and the class count
// (0: max label + 1). kIgnoredLabel is allowed anywhere.
Tensor checked_labels(const LoadedData& d, int64_t count, int64_t& classes) {
  if (!is_integer(d.labels.dtype())) {
    throw Error("labels are " + std::string(dtype_name(d.labels.dtype())) + ": expected integer class indices")
        .in_file(d.labels_file);
  }
  const std::vector<int64_t> values = d.labels.to_int64();
  const bool one_per_sample = d.labels.rank() == 1 || (d.labels.rank() == 2 && d.labels.sizes()[1] == 1);
  const bool per_position = d.labels.rank() == 2 && !one_per_sample;
  if (d.labels.rank() == 0 || d.labels.sizes()[0] != count || !(one_per_sample || per_position)) {
    throw Error("counts of inputs and labels differ: " + std::to_string(count) + " inputs in " + d.images_file +
                " but labels " + Shape::of(d.labels.sizes()).to_string() + " in " + d.labels_file + " (expected (" +
                std::to_string(count) + ") or (" + std::to_string(count) + ", T))")
        .in_file(d.labels_file);
  }
  const int64_t per_row = per_position ? d.labels.sizes()[1] : 1;
  int64_t max_label = -1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] == kIgnoredLabel) continue;
    const bool out_of_range = values[i] < 0 || (classes > 0 && values[i] >= classes);
    if (out_of_range) {
      const std::string where = per_position
                                    ? "row " + std::to_string(i / per_row) + ", position " + std::to_string(i % per_row)
                                    : "index " + std::to_string(i);
      throw Error("label " + std::to_string(values[i]) + " at " + where + ", expected " +
                  (classes > 0 ? "< " + std::to_string(classes) : std::string(">= 0")) + " (or " +
                  std::to_string(kIgnoredLabel) + ", ignored)")
          .in_file(d.labels_file);
    }
    max_label = std::max(max_label, values[i]);
  }
  if (classes == 0) classes = max_label + 1;
  Tensor labels(DType::Int64, per_position ? d.labels.sizes() : std::vector<int64_t>{count});
  std::copy(values.begin(), values.end(), labels.data<int64_t>().begin());
  return labels;
}

// The values comma-separated, each printed with `format` (a printf format of one double).
std::string joined_floats(const std::vector<float>& values, const char* format) {
  std::string text;
  for (float v : values) {
    char item[32];
    std::snprintf(item, sizeof item, format, static_cast<double>(v));
    text += (text.empty() ? "" : ",") + std::string(item);
  }
  return text;
}

std::string format_values(const std::vector<float>& values) {
  const std::string text = joined_floats(values, "%.4f");
  return values.size() > 1 ? "(" + text + ")" : text;
}

// Per-channel statistics (axis 1; rank-2 features count as one channel) of `x`.
void channel_statistics(const Tensor& x, std::vector<float>& mean, std::vector<float>& stddev) {
  const int64_t n = x.sizes()[0], channels = x.rank() > 2 ? x.sizes()[1] : 1;
  const int64_t inner = n == 0 ? 0 : x.numel() / (n * channels);
  auto v = x.data<float>();
  mean.assign(channels, 0);
  stddev.assign(channels, 1);
  // Two passes: the variance as the mean of (x - mean)², which is 0 for a constant channel. The one-pass
  // E[x²] - mean² left rounding there: a channel of 72/255 everywhere got std 1.1e-7, and a later pixel of
  // 73 would have been normalised to 35000 (an outside check).
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = v.data() + (i * channels + c) * inner;
      for (int64_t k = 0; k < inner; ++k) sum += p[k];
    }
    const double count = static_cast<double>(n * inner), m = count > 0 ? sum / count : 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = v.data() + (i * channels + c) * inner;
      for (int64_t k = 0; k < inner; ++k) squares += (p[k] - m) * (p[k] - m);
    }
    const double var = count > 0 ? squares / count : 0;
    mean[c] = static_cast<float>(m);
    stddev[c] = var > 0 ? static_cast<float>(std::sqrt(var)) : 1.0f;
  }
}

void normalize_in_place(Tensor& x, const std::vector<float>& mean, const std::vector<float>& stddev) {
  const int64_t n = x.sizes()[0], channels = static_cast<int64_t>(mean.size());
  const int64_t inner = n == 0 ? 0 : x.numel() / (n * channels);
  auto v = x.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      float* p = v.data() + (i * channels + c) * inner;
      for (int64_t k = 0; k < inner; ++k) p[k] = (p[k] - mean[c]) / stddev[c];
    }
}

}  // namespace

namespace {

// "; class counts 0:600 1:600 ..." for one label per sample (up to 20 classes; beyond, the smallest and
// largest), so a skewed or class-sorted file shows before training; classes without a sample are named.
std::string class_counts_text(const Dataset& data) {
  if (data.per_position_labels() || data.classes < 1 || data.classes > (int64_t{1} << 20)) return "";
  std::vector<int64_t> counts(static_cast<size_t>(data.classes));
  for (int64_t label : data.labels.data<int64_t>())
    if (label >= 0 && label < data.classes) ++counts[static_cast<size_t>(label)];
  std::string text = "; class counts";
  if (data.classes <= 20) {
    for (size_t c = 0; c < counts.size(); ++c) text += " " + std::to_string(c) + ":" + std::to_string(counts[c]);
  } else {
    const auto [low, high] = std::minmax_element(counts.begin(), counts.end());
    text += " from " + std::to_string(*low) + " (class " + std::to_string(low - counts.begin()) + ") to " +
            std::to_string(*high) + " (class " + std::to_string(high - counts.begin()) + ")";
  }
  const int64_t empty = std::count(counts.begin(), counts.end(), 0);
  if (empty > 0)
    text += "; " + std::to_string(empty) + " of " + std::to_string(data.classes) + " classes have no sample";
  return text;
}

}  // namespace

DataInputs Dataset::model_inputs() const {
  if (extra_inputs.empty()) return DataInputs(inputs);
  NamedTensors named{{input_name, inputs}};
  named.insert(named.end(), extra_inputs.begin(), extra_inputs.end());
  return DataInputs(std::move(named));
}

std::vector<int64_t> Dataset::sample_shape() const {
  const auto& s = inputs.sizes();
  return s.empty() ? std::vector<int64_t>{} : std::vector<int64_t>(s.begin() + 1, s.end());
}

Dataset load_dataset(const std::string& spec, const DatasetOptions& options) {
  const std::size_t colon = spec.find(':');
  const std::string prefix = spec.substr(0, colon), args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const DataSource* source = nullptr;
  std::string known;
  for (const DataSource& s : data_sources()) {
    if (prefix == s.prefix) source = &s;
    known += (known.empty() ? "" : ", ") + std::string(s.prefix);
  }
  if (!source) throw Error("unknown dataset '" + spec + "': expected one of " + known + " (see --help)");
  is_test_split(options);
  if (!options.extra_inputs.empty() && prefix != "npz") {
    throw Error("the model reads several data inputs (" + options.input_name + ", " + options.extra_inputs[0].name +
                (options.extra_inputs.size() > 1 ? ", ..." : "") +
                "): give them as npz:FILE with an array named after each input, and labels");
  }
  LoadedData d = source->load(args, options);

  Dataset data;
  const bool ids = options.integer_inputs;
  data.inputs =
      ids ? inputs_as_ids(d.inputs, d.images_file) : inputs_as_float(d.inputs, d.images_file, options.input_rank);
  data.raw_dtype = dtype_name(d.inputs.dtype());
  if (d.inputs.dtype() == DType::UInt8 && !ids) data.input_scale = 1.0f / 255.0f;
  data.hold_out_tail = prefix == "tokens" || prefix == "text";
  data.classes = options.classes > 0 && d.classes == 0 ? options.classes : d.classes;
  data.labels = checked_labels(d, data.inputs.sizes()[0], data.classes);
  data.class_names = d.class_names;
  if (!options.extra_inputs.empty()) data.input_name = options.input_name;
  for (size_t i = 0; i < d.extra_inputs.size(); ++i) {
    const auto& [name, raw] = d.extra_inputs[i];
    const std::string where = d.images_file + " (array " + name + ")";
    Tensor t = extra_input_as(raw, options.extra_inputs[i].dtype, where);
    if (t.rank() == 0 || t.sizes()[0] != data.inputs.sizes()[0]) {
      throw Error("array " + name + " has " + std::to_string(t.rank() == 0 ? 0 : t.sizes()[0]) + " rows, " +
                  options.input_name + " has " + std::to_string(data.inputs.sizes()[0]))
          .in_file(d.images_file);
    }
    data.extra_inputs.emplace_back(name, std::move(t));
  }
  data.description = d.source + ": " + std::to_string(data.size()) + " samples " +
                     Shape::of(data.sample_shape()).to_string() + ", " + std::to_string(data.classes) + " classes";
  if (ids) data.description += ", token ids (not normalised)";
  for (const auto& [name, tensor] : data.extra_inputs) {
    data.description += (&tensor == &data.extra_inputs.front().second ? "; with " : ", ") + name + " " +
                        Shape::of(std::vector<int64_t>(tensor.sizes().begin() + 1, tensor.sizes().end())).to_string() +
                        " " + std::string(dtype_name(tensor.dtype()));
  }
  if (options.normalize == Normalization::MeanStd && !ids) {
    const int64_t channels = data.inputs.rank() > 2 ? data.inputs.sizes()[1] : 1;
    // Data of another channel count than the model's image input: said as shapes, before the model's
    // recorded statistics (eval) would be blamed for having the model's count.
    if (options.image_shape.size() == 3 && data.inputs.rank() == 4 && channels != options.image_shape[0]) {
      const std::vector<int64_t>& chw = options.image_shape;
      throw Error("dataset inputs " + Shape::of(data.inputs.sizes()).to_string() + " do not match the model input '" +
                  options.input_name + "' (batch," + std::to_string(chw[0]) + "," + std::to_string(chw[1]) + "," +
                  std::to_string(chw[2]) + "): " + std::to_string(channels) + " channels, the model takes " +
                  std::to_string(chw[0]));
    }
    std::string origin = "training split";
    if (!options.mean.empty() || !options.std.empty()) {
      data.mean = options.mean, data.std = options.std, origin = "given";
    } else if (!d.train_mean.empty()) {
      data.mean = d.train_mean, data.std = d.train_std;
    } else {
      channel_statistics(data.inputs, data.mean, data.std);
      origin = "these files";
    }
    if (data.mean.size() == 1) data.mean.assign(channels, data.mean[0]);
    if (data.std.size() == 1) data.std.assign(channels, data.std[0]);
    if (static_cast<int64_t>(data.mean.size()) != channels || static_cast<int64_t>(data.std.size()) != channels) {
      throw Error("normalisation needs " + std::to_string(channels) +
                  " per-channel means and standard deviations, got " + std::to_string(data.mean.size()) + " and " +
                  std::to_string(data.std.size()));
    }
    for (float s : data.std)
      if (!(s > 0)) throw Error("normalisation: a standard deviation must be positive");
    if (data.inputs.raw() == d.inputs.raw()) data.inputs = data.inputs.clone();  // never normalise the caller's data
    normalize_in_place(data.inputs, data.mean, data.std);
    data.description +=
        ", normalised with mean " + format_values(data.mean) + " std " + format_values(data.std) + " (" + origin + ")";
  }
  if (options.float64_inputs && data.inputs.dtype() == DType::Float32) {
    Tensor wide(DType::Float64, data.inputs.sizes());
    const auto from = data.inputs.data<float>();
    std::copy(from.begin(), from.end(), wide.data<double>().begin());
    data.inputs = std::move(wide);
    data.description += ", as float64 (the model's input)";
  }
  data.description += class_counts_text(data);
  return data;
}

void check_matches_model_input(const Dataset& dataset, const std::string& input_name, const Shape& model_input,
                               DType model_dtype) {
  check_matches_model_input(dataset.inputs, input_name, model_input, model_dtype);
}

void check_matches_model_input(const Tensor& data, const std::string& input_name, const Shape& model_input,
                               DType model_dtype) {
  const bool data_ids = is_integer(data.dtype()), model_ids = is_integer(model_dtype);
  if (data_ids != model_ids) {
    throw Error("dataset inputs are " + std::string(dtype_name(data.dtype())) + " but the model input '" + input_name +
                "' is " + std::string(dtype_name(model_dtype)));
  }
  if (!model_input.rank_known) return;
  bool match = model_input.rank() == data.rank();
  for (int64_t d = 1; match && d < model_input.rank(); ++d) {
    const Dim& dim = model_input.dims[d];
    if (dim.is_static() && dim.value() != data.sizes()[d]) match = false;
  }
  if (!match) {
    throw Error("dataset inputs " + Shape::of(data.sizes()).to_string() + " do not match the model input '" +
                input_name + "' " + model_input.to_string());
  }
}

std::string full_precision_list(const std::vector<float>& values) { return joined_floats(values, "%.9g"); }

std::map<std::string, std::string> preprocessing_metadata(const Dataset& dataset) {
  std::map<std::string, std::string> m;
  const bool normalised = !dataset.mean.empty();
  m["onnxtrain.preprocess"] =
      normalised ? "x = (raw * scale - mean[c]) / std[c], c = the input's axis 1" : "x = raw * scale";
  m["onnxtrain.preprocess.scale"] = full_precision_list({dataset.input_scale});
  m["onnxtrain.preprocess.raw_dtype"] = dataset.raw_dtype;
  const bool ids = is_integer(dataset.inputs.dtype());
  if (ids) m["onnxtrain.preprocess"] = "none: x = raw integer token ids";
  m["onnxtrain.preprocess.layout"] = ids ? "NT" : dataset.inputs.rank() == 4 ? "NCHW" : "NC";
  if (normalised) {
    m["onnxtrain.preprocess.mean"] = full_precision_list(dataset.mean);
    m["onnxtrain.preprocess.std"] = full_precision_list(dataset.std);
  }
  m["onnxtrain.classes"] = std::to_string(dataset.classes);
  if (!dataset.class_names.empty()) {
    std::string names;  // a JSON array of strings: folder names may hold commas
    for (const std::string& name : dataset.class_names) {
      std::string quoted;
      for (char c : name) {
        if (c == '"' || c == '\\') quoted += '\\';
        quoted += c;
      }
      names += (names.empty() ? "[\"" : ", \"") + quoted + "\"";
    }
    m["onnxtrain.class_names"] = names + "]";
  }
  return m;
}

Dataset select_rows(const Dataset& dataset, const std::vector<int64_t>& rows) {
  Dataset part = dataset;
  auto with_rows = [&](const Tensor& t) {
    std::vector<int64_t> sizes = t.sizes();
    sizes[0] = static_cast<int64_t>(rows.size());
    Tensor out(t.dtype(), sizes);
    const std::size_t row = dataset.size() > 0 ? t.nbytes() / dataset.size() : 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      ONNXTRAIN_CHECK(0 <= rows[i] && rows[i] < dataset.size(), "row out of range");
      if (row > 0) std::memcpy(out.raw() + i * row, t.raw() + rows[i] * row, row);
    }
    return out;
  };
  part.inputs = with_rows(dataset.inputs);
  for (auto& [name, tensor] : part.extra_inputs) tensor = with_rows(tensor);
  part.labels = with_rows(dataset.labels);
  return part;
}

}  // namespace onnxtrain
