// Transpose (opset 1, 13): out dim k is input dim perm[k]; perm defaults to the reversed dims.
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class TransposeKernel : public DataMovementKernel {
 public:
  explicit TransposeKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    perm_ = transpose_perm(spec);
    std::vector<bool> seen(rank, false);
    bool valid = static_cast<int64_t>(perm_.size()) == rank;
    for (int64_t p : perm_) {
      valid = valid && p >= 0 && p < rank && !seen[p];
      if (valid) seen[p] = true;
    }
    if (!valid)
      fail("perm " + sizes_to_string(perm_) + " is not a permutation of the " + std::to_string(rank) + " dims");
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t> in_strides = row_major_strides(inputs[0].sizes);
    std::vector<int64_t> sizes, strides;
    for (int64_t p : perm_) {
      sizes.push_back(inputs[0].sizes[p]);
      strides.push_back(in_strides[p]);
    }
    require_output_sizes(outputs[0], sizes);
    copy_strided(inputs[0], 0, strides, outputs[0]);
  }

 private:
  std::vector<int64_t> perm_;
};

}  // namespace

void register_reference_transpose_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Transpose", kFixedSizeDTypes, make_kernel<TransposeKernel>));
}

}  // namespace onnxtrain
