#include "frontend/data_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "graph/error.h"

namespace onnxtrain {

namespace {

constexpr std::size_t kQueueDepth = 2;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The rows held out for validation: `held_out` rows drawn per class in proportion to its size (the
// largest remainders get the rows left over, ties to the smaller label), each class's rows shuffled by a
// stream of its own from `seed`. Sorted.
std::vector<int64_t> stratified_holdout(const Tensor& labels, int64_t held_out, double fraction, uint64_t seed) {
  std::map<int64_t, std::vector<int64_t>> rows_of;
  const auto values = labels.data<int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i) rows_of[values[i]].push_back(static_cast<int64_t>(i));
  struct Quota {
    int64_t label, count;
    double remainder;
  };
  std::vector<Quota> quotas;
  int64_t assigned = 0;
  for (const auto& [label, rows] : rows_of) {
    const double exact = static_cast<double>(rows.size()) * fraction;
    const auto count = static_cast<int64_t>(std::floor(exact));
    quotas.push_back({label, count, exact - static_cast<double>(count)});
    assigned += count;
  }
  std::vector<std::size_t> by_remainder(quotas.size());
  for (std::size_t k = 0; k < quotas.size(); ++k) by_remainder[k] = k;
  std::stable_sort(by_remainder.begin(), by_remainder.end(),
                   [&](std::size_t a, std::size_t b) { return quotas[a].remainder > quotas[b].remainder; });
  for (std::size_t k = 0; assigned < held_out && k < by_remainder.size(); ++k, ++assigned)
    ++quotas[by_remainder[k]].count;

  std::vector<int64_t> held;
  for (const Quota& q : quotas) {
    std::vector<int64_t>& rows = rows_of[q.label];
    std::mt19937_64 rng(splitmix64(seed ^ splitmix64(0x76616c6964ull ^ static_cast<uint64_t>(q.label))));
    for (int64_t i = static_cast<int64_t>(rows.size()) - 1; i > 0; --i) {
      std::swap(rows[i], rows[static_cast<std::size_t>(rng() % static_cast<uint64_t>(i + 1))]);
    }
    held.insert(held.end(), rows.begin(), rows.begin() + q.count);
  }
  std::sort(held.begin(), held.end());
  return held;
}

// `held_out` rows drawn by `seed` without regard to labels (per-position labels have no one class). Sorted.
std::vector<int64_t> random_holdout(int64_t rows, int64_t held_out, uint64_t seed) {
  std::vector<int64_t> all(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) all[i] = i;
  std::mt19937_64 rng(splitmix64(seed ^ 0x76616c6964ull));
  for (int64_t i = 0; i < held_out; ++i) {  // a partial Fisher-Yates: the first held_out places
    std::swap(all[i], all[i + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - i))]);
  }
  all.resize(static_cast<std::size_t>(held_out));
  std::sort(all.begin(), all.end());
  return all;
}

// The validation rows of `dataset` and how they were chosen, for its description.
std::vector<int64_t> validation_rows(const Dataset& dataset, int64_t held_out, double fraction, uint64_t seed,
                                     std::string& how) {
  if (held_out == 0) return {};
  if (dataset.hold_out_tail) {
    how = "the stream's last windows (a held-out tail)";
    std::vector<int64_t> tail(static_cast<std::size_t>(held_out));
    for (int64_t i = 0; i < held_out; ++i) tail[i] = dataset.size() - held_out + i;
    return tail;
  }
  how = "drawn by seed " + std::to_string(seed);
  if (dataset.per_position_labels()) return random_holdout(dataset.size(), held_out, seed);
  how = "stratified by class, " + how;
  return stratified_holdout(dataset.labels, held_out, fraction, seed);
}

}  // namespace

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions options) : dataset_(dataset), options_(options) {
  if (options_.batch < 1) throw Error("the batch size must be at least 1, got " + std::to_string(options_.batch));
  if (options_.augment.any() && (dataset_.inputs.rank() != 4 || dataset_.inputs.dtype() != DType::Float32)) {
    throw Error("--augment crops and flips images (N, C, H, W); the data are " +
                std::string(dtype_name(dataset_.inputs.dtype())) + " " +
                Shape::of(dataset_.inputs.sizes()).to_string());
  }
  if (!(options_.validation_fraction >= 0.0 && options_.validation_fraction < 1.0)) {
    throw Error("the validation fraction must be in [0, 1), got " + std::to_string(options_.validation_fraction));
  }
  const int64_t n = dataset_.size();
  const auto held_out = static_cast<int64_t>(std::floor(static_cast<double>(n) * options_.validation_fraction));
  std::string how;
  const std::vector<int64_t> held =
      validation_rows(dataset_, held_out, options_.validation_fraction, options_.seed, how);
  train_rows_.reserve(static_cast<std::size_t>(n - held_out));
  for (int64_t i = 0, v = 0; i < n; ++i) {
    if (v < held_out && held[v] == i)
      ++v;
    else
      train_rows_.push_back(i);
  }
  train_size_ = n - held_out;
  validation_ = select_rows(dataset_, held);
  validation_.description =
      "validation split of " + dataset_.description + ": " + std::to_string(held_out) + " samples, " + how;
  batches_per_epoch_ =
      options_.drop_last ? train_size_ / options_.batch : (train_size_ + options_.batch - 1) / options_.batch;
  if (batches_per_epoch_ == 0) {
    throw Error("no training batches: " + std::to_string(train_size_) + " training samples (" + dataset_.description +
                ") for batch " + std::to_string(options_.batch) + (options_.drop_last ? " with drop_last" : ""));
  }
  if (options_.prefetch) worker_ = std::thread([this] { produce(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_free_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order = train_rows_;
  if (!options_.shuffle) return order;
  std::mt19937_64 rng(splitmix64(options_.seed ^ splitmix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = train_size_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::order_of(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(order_mutex_);
  if (cached_epoch_ != epoch) {
    cached_order_ = std::make_shared<const std::vector<int64_t>>(epoch_order(epoch));
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

Batch DataLoader::batch_at(int64_t epoch, int64_t index) const {
  if (epoch < 0 || index < 0 || index >= batches_per_epoch_) {
    throw Error("data position (epoch " + std::to_string(epoch) + ", batch " + std::to_string(index) +
                ") is out of range: an epoch has " + std::to_string(batches_per_epoch_) + " batches");
  }
  const std::shared_ptr<const std::vector<int64_t>> order = order_of(epoch);
  const int64_t first = index * options_.batch, count = std::min(options_.batch, train_size_ - first);
  std::vector<int64_t> sizes = dataset_.inputs.sizes();
  sizes[0] = count;
  Tensor x = options_.allocate_input ? options_.allocate_input(dataset_.inputs.dtype(), sizes)
                                     : Tensor(dataset_.inputs.dtype(), sizes);
  ONNXTRAIN_CHECK(x.dtype() == dataset_.inputs.dtype() && x.sizes() == sizes, "allocate_input made another shape");
  std::vector<int64_t> label_sizes = dataset_.labels.sizes();
  label_sizes[0] = count;
  Batch b{std::move(x), Tensor(DType::Int64, label_sizes), epoch, index, index + 1 == batches_per_epoch_};
  b.x_name = dataset_.input_name;
  const auto rows = static_cast<std::size_t>(dataset_.size());
  auto copy_rows = [&](const Tensor& from, Tensor& to) {
    const std::size_t row = from.nbytes() / rows;
    for (int64_t i = 0; i < count; ++i) std::memcpy(to.raw() + i * row, from.raw() + (*order)[first + i] * row, row);
  };
  copy_rows(dataset_.inputs, b.x);
  copy_rows(dataset_.labels, b.y);
  if (options_.augment.any()) augment_images(b.x, epoch, index);
  for (const auto& [name, from] : dataset_.extra_inputs) {
    std::vector<int64_t> extra_sizes = from.sizes();
    extra_sizes[0] = count;
    b.extra.emplace_back(name, Tensor(from.dtype(), extra_sizes));
    copy_rows(from, b.extra.back().second);
  }
  return b;
}

// Black after the dataset's scaling and normalisation: what a zero pixel of the source became.
void DataLoader::augment_images(Tensor& x, int64_t epoch, int64_t index) const {
  const int64_t n = x.sizes()[0], c = x.sizes()[1], h = x.sizes()[2], w = x.sizes()[3];
  const int64_t pad = options_.augment.crop_padding;
  std::vector<float> black(static_cast<size_t>(c), 0.0f);
  for (int64_t k = 0; k < c && static_cast<size_t>(k) < dataset_.mean.size(); ++k)
    black[k] = -dataset_.mean[k] / dataset_.std[k];
  std::mt19937_64 draws(options_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1)) ^
                        (0xC2B2AE3D27D4EB4Full * static_cast<uint64_t>(index + 1)));
  std::vector<float> image(static_cast<size_t>(c * h * w));
  for (int64_t s = 0; s < n; ++s) {
    // The window's offset in the padded image (0..2·pad each way) and the flip, drawn in that order.
    const int64_t dy = pad ? static_cast<int64_t>(draws() % static_cast<uint64_t>(2 * pad + 1)) - pad : 0;
    const int64_t dx = pad ? static_cast<int64_t>(draws() % static_cast<uint64_t>(2 * pad + 1)) - pad : 0;
    const bool flip = options_.augment.flip && (draws() & 1);
    float* sample = x.data<float>().data() + s * c * h * w;
    std::copy(sample, sample + c * h * w, image.begin());
    for (int64_t k = 0; k < c; ++k)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t xo = 0; xo < w; ++xo) {
          const int64_t sy = y + dy, sx = (flip ? w - 1 - xo : xo) + dx;
          sample[(k * h + y) * w + xo] =
              sy >= 0 && sy < h && sx >= 0 && sx < w ? image[static_cast<size_t>((k * h + sy) * w + sx)] : black[k];
        }
  }
}

DataInputs Batch::inputs() const {
  if (extra.empty()) return DataInputs(x);
  NamedTensors named{{x_name, x}};
  named.insert(named.end(), extra.begin(), extra.end());
  return DataInputs(std::move(named));
}

LoaderPosition DataLoader::after(LoaderPosition p) const {
  return p.index + 1 < batches_per_epoch_ ? LoaderPosition{p.epoch, p.index + 1} : LoaderPosition{p.epoch + 1, 0};
}

void DataLoader::produce() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    space_free_.wait(lock, [this] { return stop_ || queue_.size() < kQueueDepth; });
    if (stop_) return;
    const LoaderPosition at = producer_;
    const uint64_t generation = generation_;
    lock.unlock();
    Prepared prepared;
    try {
      prepared.batch = batch_at(at.epoch, at.index);
    } catch (...) {
      prepared.error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // a seek() moved on while this batch was made
    queue_.push_back(std::move(prepared));
    producer_ = after(at);
    batch_ready_.notify_one();
  }
}

Batch DataLoader::next() {
  if (!options_.prefetch) {
    std::lock_guard<std::mutex> lock(mutex_);
    Batch b = batch_at(consumer_.epoch, consumer_.index);
    consumer_ = after(consumer_);
    return b;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  batch_ready_.wait(lock, [this] { return !queue_.empty(); });
  Prepared prepared = std::move(queue_.front());
  queue_.pop_front();
  consumer_ = after(consumer_);
  space_free_.notify_one();
  if (prepared.error) std::rethrow_exception(prepared.error);
  return std::move(prepared.batch);
}

LoaderPosition DataLoader::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return consumer_;
}

void DataLoader::seek(int64_t epoch, int64_t index) {
  if (epoch < 0 || index < 0 || index >= batches_per_epoch_) {
    throw Error("cannot resume at epoch " + std::to_string(epoch) + ", batch " + std::to_string(index) +
                ": an epoch has " + std::to_string(batches_per_epoch_) +
                " batches (was the checkpoint made with another batch size or dataset?)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++generation_;
  queue_.clear();
  consumer_ = producer_ = {epoch, index};
  space_free_.notify_all();
}

}  // namespace onnxtrain
