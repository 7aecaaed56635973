#include "kernels/onednn/onednn_common.h"

#include "kernels/backend_info.h"

namespace onnxtrain::onednn {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  // One stream per thread: a pipeline stage's worker thread gets its own.
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dnnl::memory::data_type data_type_of(DType dtype) {
  if (dtype == DType::Float32) return dnnl::memory::data_type::f32;
  if (dtype == DType::BFloat16) return dnnl::memory::data_type::bf16;
  throw Error("oneDNN kernels take float32 or bfloat16, not " + std::string(dtype_name(dtype)));
}

bool takes_dtype(DType dtype) { return dtype == DType::Float32 || (dtype == DType::BFloat16 && cpu_has_native_bf16()); }

dnnl::memory::dims dims_of(const std::vector<int64_t>& sizes) { return dnnl::memory::dims(sizes.begin(), sizes.end()); }

dnnl::memory::desc plain_desc(const std::vector<int64_t>& sizes, DType dtype) {
  dnnl::memory::dims dims = dims_of(sizes);
  dnnl::memory::dims strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return dnnl::memory::desc(dims, data_type_of(dtype), strides);
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const TensorView& view) {
  return dnnl::memory(desc, cpu_engine(), view.data);
}

}  // namespace onnxtrain::onednn
