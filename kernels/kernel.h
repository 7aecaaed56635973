// The kernel interface: device-neutral, prepared once, run many times. A kernel is looked up by
// (op, device, dtype, implementation) in a KernelRegistry, prepared for fixed tensor sizes and
// attributes (oneDNN primitive descriptors, workspaces, cuDNN algorithms are chosen here), then run on a
// Stream with views of the input and output buffers. Kernels never see the IR (Graph/Node) and never
// touch memory of another device implicitly; a CPU stream runs synchronously.
//
//   const KernelEntry* entry = KernelRegistry::builtin().find("", "Relu", DeviceKind::Cpu, DType::Float32);
//   std::unique_ptr<Kernel> relu = entry->prepare(spec);   // spec: attributes, input/output descs
//   relu->run(stream, {x_view}, {y_view});
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/attributes.h"
#include "graph/dtype.h"
#include "graph/tensor.h"
#include "kernels/tap_layout.h"

namespace onnxtrain {

enum class DeviceKind { Cpu, Cuda };
std::string_view device_kind_name(DeviceKind device);

// One device a session runs on: the CPU, or cuda:N.
struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceKind::Cuda, index}; }
  std::string name() const;  // "cpu", "cuda:1"
  friend bool operator==(const Device&, const Device&) = default;
};

// Dtype and sizes of one kernel argument; dtype Undefined marks an omitted optional input or output.
struct TensorDesc {
  DType dtype = DType::Undefined;
  std::vector<int64_t> sizes;
  bool present() const { return dtype != DType::Undefined; }
  int64_t numel() const;
};

// A non-owning view of a buffer on some device. `data` is null for an omitted argument.
struct TensorView {
  DType dtype = DType::Undefined;
  std::vector<int64_t> sizes;
  void* data = nullptr;
  DeviceKind device = DeviceKind::Cpu;

  static TensorView of(Tensor& t) { return {t.dtype(), t.sizes(), t.empty() ? nullptr : t.raw(), DeviceKind::Cpu}; }
  static TensorView of(const Tensor& t) {
    return {t.dtype(), t.sizes(), t.empty() ? nullptr : const_cast<std::byte*>(t.raw()), DeviceKind::Cpu};
  }
  bool present() const { return data != nullptr || (dtype != DType::Undefined && numel() == 0); }
  int64_t numel() const;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// What a kernel is prepared for.
struct KernelSpec {
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  int opset = 0;
  Attributes attributes;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::string node_name;  // for error messages only
};

// Where a kernel runs. The CPU stream is synchronous. A CUDA stream carries the cudaStream_t it wraps
// (`native_handle`, null = the legacy default stream) and the device index; CUDA kernels enqueue their
// work on it and return without synchronising (kernels/cuda/cuda_context.h reads it).
//
// `run_index` numbers the runs of a session (a training step: the mini-batch). Random kernels (Dropout)
// are stateless: element i of a tensor of `count` elements draws Philox4x32-10 keyed by
// random_stream_seed(seed attribute, run_index) at element counter draw_offset(count) + i (kernels/philox.h),
// so run r's masks do not depend on earlier runs or on the backend; a resumed run, or a micro-batch on
// another thread, draws the same mask. `set_rows` places the run's rows in the mini-batch (a micro-batch,
// a replica's slice): a row gets the draws it gets in the whole mini-batch, whatever the split.
class Stream {
 public:
  explicit Stream(DeviceKind device = DeviceKind::Cpu, uint64_t run_index = 0, void* native_handle = nullptr,
                  int device_index = 0)
      : device_(device), run_index_(run_index), native_handle_(native_handle), device_index_(device_index) {}
  DeviceKind device() const { return device_; }
  uint64_t run_index() const { return run_index_; }
  void* native_handle() const { return native_handle_; }  // cudaStream_t for a CUDA stream
  int device_index() const { return device_index_; }      // cuda:N

  // This run computes rows [first_row, first_row + rows) of the mini-batch (rows 0: the whole of it).
  void set_rows(uint64_t first_row, int64_t rows) {
    first_row_ = first_row;
    rows_ = rows;
  }
  // The counter of element 0 of a tensor of `count` elements: first_row·count/rows, where the tensor is laid
  // out row-major over the batch ((N, …), and (N·T, …) alike: count a multiple of rows); else 0.
  uint64_t draw_offset(int64_t count) const {
    return rows_ > 0 && count % rows_ == 0 ? first_row_ * static_cast<uint64_t>(count / rows_) : 0;
  }

  // Values a kernel derives from an input that a later kernel of the same run may read instead of deriving
  // them again (onednn/single_pixel_conv.h: the weight taps a forward convolution gathers, which its
  // backward gathers too), keyed by the input's address and how they were derived. Off unless the owner
  // of the stream enables it: InferenceSession::run does, for the one run the stream lives for, and
  // forgets a value's entries when its buffer goes back to the pool, so that an entry never outlives the
  // content it was derived from.
  using Derived = std::shared_ptr<const std::vector<std::byte>>;
  void enable_derived_values() { keeps_derived_ = true; }
  bool keeps_derived_values() const { return keeps_derived_; }
  Derived derived(const void* source, const std::string& how) const;  // null when none is kept
  void keep_derived(const void* source, const std::string& how, Derived value);
  void forget_derived(const void* source);
  // The value derived from `source` as `how` where this stream keeps values: its own where it holds one
  // (the same input read twice in a run, or carried from an earlier run), else `bytes` written by
  // fill(data) into `buffer` and kept. `buffer` is the deriving kernel's, reused once no stream holds it.
  template <typename Fill>
  const std::byte* derive(const void* source, const std::string& how, size_t bytes,
                          std::shared_ptr<std::vector<std::byte>>& buffer, Fill&& fill) {
    if (const Derived held = derived(source, how)) return held->data();
    if (!buffer || buffer.use_count() > 1 || buffer->size() != bytes)
      buffer = std::make_shared<std::vector<std::byte>>(bytes);
    fill(buffer->data());
    keep_derived(source, how, buffer);
    return buffer->data();
  }
  // Entries carried between runs (InferenceSession::carry_weight_derived_values): `from`'s copied in, and
  // `source`'s copied out into `to`.
  using DerivedMap = std::map<std::pair<const void*, std::string>, Derived>;
  void adopt_derived(const DerivedMap& from);
  void copy_derived_of(const void* source, DerivedMap& to) const;

  // An output summed over runs (InferenceSession::run_into: a pipeline stage's micro-batch gradients summed
  // in place), given only to a kernel that says it sums (Kernel::sums_output). The kernel either writes
  // (`first`) or adds into the buffer at once, or keeps the sum's taps in `partial` (`layout`: the output is
  // zero elsewhere) between the runs, which the session writes into the buffer once, when the sum ends: a
  // convolution's weight gradient that is mostly zeros sums only its taps.
  //
  // On a stream that defers sums (`defers_sums`), a kernel may instead stage its operands run by run and
  // leave the product to `deferred`, which the session computes once over all the runs' rows when the sum
  // ends: a weight gradient far larger than the rows that make it (ResNet-18's layer4 at micro-batches of
  // 8) then costs one product instead of a read and a write of the weight's size per run.
  struct DeferredProduct {
    virtual ~DeferredProduct() = default;
    virtual void finish(float* out, bool adds) = 0;  // the product into `out`, added to it when `adds`
  };
  struct OutputSum {
    bool first = true;      // this run starts the sum: the buffer's content is not part of it
    bool kept = false;      // `partial` holds this sum's taps (false: the kernel starts them afresh)
    bool overwrite = true;  // session: the sum started with a write, so the expansion writes the zeros too
    std::vector<float> partial;
    TapLayout layout;
    std::shared_ptr<DeferredProduct> deferred;  // this sum's staged product (null: none, or started afresh)
  };
  using OutputSums = std::map<const void*, OutputSum>;  // by output buffer
  // Before a run that writes (`add` false: a new sum) or adds (`add`) into `buffer`: a new sum drops the
  // taps and the staged product a kernel kept for an earlier one (their buffer kept).
  static void start_or_continue_sum(OutputSums& sums, const void* buffer, bool add);
  // `defer`: the owner reads no summed buffer before the sum ends (InferenceSession::finish_sums), so
  // kernels may defer their products to it.
  void sum_outputs(OutputSums* sums, bool defer = false) {
    sums_ = sums;
    defers_sums_ = defer;
  }
  OutputSum* output_sum(const void* buffer) const;  // null: the buffer is written as usual
  bool defers_sums() const { return sums_ && defers_sums_; }

 private:
  DeviceKind device_;
  uint64_t run_index_;
  uint64_t first_row_ = 0;
  int64_t rows_ = 0;
  void* native_handle_;
  int device_index_;
  bool keeps_derived_ = false;
  DerivedMap derived_;
  OutputSums* sums_ = nullptr;
  bool defers_sums_ = false;
};

// The key (stream seed) of a random kernel's Philox draws in run `run_index` (splitmix64 of the pair:
// distinct, well mixed keys for neighbouring runs and nodes).
uint64_t random_stream_seed(uint64_t seed, uint64_t run_index);

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Inputs and outputs in the op's order, with the sizes given at prepare time; outputs are allocated
  // by the caller. Throws Error for data the op rejects (an index out of range, say).
  virtual void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) = 0;
  // Whether run() sums output `index` over runs where the stream asks (Stream::output_sum). Kernels that
  // do it for less than a write and a separate sum say so (the convolutions' weight gradients that are
  // mostly zeros: onednn/single_pixel_conv.h); the session sums the others' outputs itself.
  virtual bool sums_output(size_t /*index*/) const { return false; }
};

// Prepares a kernel; throws Error when the op's attributes or dtypes are not supported.
using KernelFactory = std::unique_ptr<Kernel> (*)(const KernelSpec&);

struct KernelEntry {
  std::string domain;
  std::string op_type;
  DeviceKind device;
  std::vector<DType> dtypes;   // the dtypes of the op's type-deciding argument that the kernel handles
  std::string implementation;  // "reference" (plain loops, the test oracle), "onednn", "cuda", ...
  KernelFactory factory;

  std::unique_ptr<Kernel> prepare(const KernelSpec& spec) const { return factory(spec); }
};

class KernelRegistry {
 public:
  void add(KernelEntry entry);  // one entry per (domain, op, device, implementation)
  // The fastest implementation for the op on the device and dtype (anything before "reference"),
  // or the one named by `implementation`. nullptr when there is none.
  const KernelEntry* find(const std::string& domain, const std::string& op_type, DeviceKind device, DType dtype,
                          const std::string& implementation = "") const;
  std::vector<const KernelEntry*> all() const;

  // Every kernel onnxtrain has (kernels/registry.cc).
  static const KernelRegistry& builtin();

 private:
  std::vector<KernelEntry> entries_;
};

// The dtype that selects a kernel for an op: its first present input (its first output when it has no
// inputs, like Constant or RandomNormal).
DType kernel_dtype(const KernelSpec& spec);

}  // namespace onnxtrain
