#include "fuzz/model_mutator.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace onnxtrain::fuzz {

namespace {

using Nodes = google::protobuf::RepeatedPtrField<onnx::NodeProto>;

// Values at the edges of what readers check: zero, one, negative, around 2^31 and 2^63.
// clang-format off
constexpr int64_t kInterestingInts[] = {0, 1, -1, 2, 3, 7, 64, 255, 65536, 2147483647, 2147483648, 4294967297,
                                        int64_t{1} << 40, std::numeric_limits<int64_t>::max(),
                                        std::numeric_limits<int64_t>::min(), -2};
constexpr int64_t kOpsets[] = {1, 6, 7, 9, 11, 12, 13, 14, 16, 17, 18, 19, 21, 22, 100, 0, -1};
const char* const kOpTypes[] = {
    "Relu", "Conv", "Gemm", "MatMul", "Add", "Mul", "Reshape", "Flatten", "Transpose", "Concat", "Split", "Slice",
    "Gather", "Softmax", "MaxPool", "AveragePool", "BatchNormalization", "LayerNormalization", "Constant", "Shape",
    "Expand", "Squeeze", "Unsqueeze", "ReduceMean", "Cast", "Pad", "Where", "Identity", "If", "Loop", "SequenceAt",
    "SplitToSequence", "NoSuchOp", ""};
const char* const kAttributeNames[] = {
    "axis", "axes", "kernel_shape", "pads", "strides", "dilations", "group", "perm", "to", "epsilon", "alpha", "beta",
    "transA", "transB", "value", "keepdims", "mode", "training_mode", "split", "allowzero"};
const char* const kLocations[] = {"weights.bin", "../weights.bin", "/etc/passwd", "missing.bin", "", ".",
                                  "weights.bin/x"};
const char* const kCounts[] = {"0", "4", "16", "65532", "65536", "65537", "-1", "99999999999999999999", "abc", ""};
// clang-format on

class Mutator {
 public:
  Mutator(onnx::ModelProto& model, unsigned int seed) : model_(model), rng_(seed) {
    collect(*model.mutable_graph());
    for (auto& f : *model.mutable_functions()) {
      lists_.push_back(f.mutable_node());
      for (auto& n : *f.mutable_node()) collect_attributes(n);
    }
  }

  // One change; false when the chosen kind finds nothing to change (the caller tries another).
  bool mutate_once() {
    switch (below(13)) {
      case 0:
        return tensor_dims();
      case 1:
        return tensor_data_type();
      case 2:
        return tensor_raw_data_length();
      case 3:
        return tensor_external_data();
      case 4:
        return attribute();
      case 5:
        return node_io_name();
      case 6:
        return node_op_type();
      case 7:
        return drop_node();
      case 8:
        return duplicate_node();
      case 9:
        return move_node();
      case 10:
        return opset_version();
      case 11:
        return value_info();
      default:
        return ir_version();
    }
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <class T, size_t N>
  const T& pick(const T (&values)[N]) {
    return values[below(N)];
  }
  int64_t interesting() { return pick(kInterestingInts); }

  // Every node list (graph, subgraphs, local functions) and every tensor (initializers, tensor attributes).
  void collect(onnx::GraphProto& g) {
    lists_.push_back(g.mutable_node());
    for (auto& t : *g.mutable_initializer()) tensors_.push_back(&t);
    for (auto& n : *g.mutable_node()) collect_attributes(n);
  }
  void collect_attributes(onnx::NodeProto& n) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) tensors_.push_back(a.mutable_t());
      if (a.has_g()) collect(*a.mutable_g());
      for (auto& g : *a.mutable_graphs()) collect(g);
    }
  }

  onnx::NodeProto* any_node() {
    std::vector<onnx::NodeProto*> nodes;
    for (Nodes* list : lists_)
      for (auto& n : *list) nodes.push_back(&n);
    return nodes.empty() ? nullptr : nodes[below(nodes.size())];
  }
  Nodes* any_nonempty_list() {
    std::vector<Nodes*> lists;
    for (Nodes* list : lists_)
      if (!list->empty()) lists.push_back(list);
    return lists.empty() ? nullptr : lists[below(lists.size())];
  }
  onnx::TensorProto* any_tensor() { return tensors_.empty() ? nullptr : tensors_[below(tensors_.size())]; }
  std::string any_value_name() {
    const onnx::GraphProto& g = model_.graph();
    std::vector<std::string> names = {"", "fuzz_undefined"};
    for (const auto& v : g.input()) names.push_back(v.name());
    for (const auto& v : g.output()) names.push_back(v.name());
    for (const auto& t : g.initializer()) names.push_back(t.name());
    for (const auto& n : g.node())
      for (const auto& o : n.output()) names.push_back(o);
    return names[below(names.size())];
  }

  bool tensor_dims() {
    onnx::TensorProto* t = any_tensor();
    if (!t) return false;
    if (t->dims_size() == 0 || below(4) == 0) {
      t->add_dims(interesting());
    } else if (below(4) == 0) {
      t->mutable_dims()->RemoveLast();
    } else {
      t->set_dims(static_cast<int>(below(t->dims_size())), interesting());
    }
    return true;
  }
  bool tensor_data_type() {
    onnx::TensorProto* t = any_tensor();
    if (!t) return false;
    t->set_data_type(below(8) == 0 ? 99 : static_cast<int32_t>(below(24)));
    return true;
  }
  bool tensor_raw_data_length() {
    onnx::TensorProto* t = any_tensor();
    if (!t) return false;
    const size_t n = t->raw_data().size();
    const size_t sizes[] = {0, 1, n / 2, n > 0 ? n - 1 : 0, n + 1, n + 4, n * 2 + 8};
    std::string raw = t->raw_data();
    raw.resize(std::min<size_t>(sizes[below(std::size(sizes))], 1 << 20), '\x3f');
    t->set_raw_data(raw);
    if (below(2) == 0) t->clear_float_data();
    return true;
  }
  bool tensor_external_data() {
    onnx::TensorProto* t = any_tensor();
    if (!t) return false;
    t->set_data_location(below(6) == 0 ? onnx::TensorProto::DEFAULT : onnx::TensorProto::EXTERNAL);
    t->clear_raw_data();
    t->clear_float_data();
    t->clear_external_data();
    auto add = [&](const char* key, const char* value) {
      auto* e = t->add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    if (below(8) != 0) add("location", pick(kLocations));
    if (below(2) == 0) add("offset", pick(kCounts));
    if (below(2) == 0) add("length", pick(kCounts));
    return true;
  }
  bool attribute() {
    onnx::NodeProto* n = any_node();
    if (!n) return false;
    if (n->attribute_size() == 0 || below(4) == 0) {
      auto* a = n->add_attribute();
      a->set_name(pick(kAttributeNames));
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(interesting());
      return true;
    }
    onnx::AttributeProto& a = *n->mutable_attribute(static_cast<int>(below(n->attribute_size())));
    switch (below(7)) {
      case 0:
        a.set_i(interesting());
        break;
      case 1: {
        const float floats[] = {
            0.0f,  -1.0f, 1e30f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
            1e-30f};
        a.set_f(pick(floats));
        break;
      }
      case 2:
        if (a.ints_size() > 0 && below(2) == 0)
          a.set_ints(static_cast<int>(below(a.ints_size())), interesting());
        else if (a.ints_size() > 0 && below(2) == 0)
          a.mutable_ints()->RemoveLast();
        else
          a.add_ints(interesting());
        break;
      case 3:
        a.set_s(below(2) ? "" : "fuzz");
        break;
      case 4:
        a.set_type(static_cast<onnx::AttributeProto::AttributeType>(below(15)));
        break;
      case 5:
        a.set_name(pick(kAttributeNames));
        break;
      default:
        a.set_ref_attr_name(below(2) ? "" : "fuzz_ref");
        break;
    }
    return true;
  }
  bool node_io_name() {
    onnx::NodeProto* n = any_node();
    if (!n) return false;
    const bool output = below(2) == 0;
    auto* names = output ? n->mutable_output() : n->mutable_input();
    const size_t choice = below(4);
    if (names->empty() || choice == 0) {
      *names->Add() = any_value_name();
    } else if (choice == 1) {
      names->RemoveLast();
    } else {
      *names->Mutable(static_cast<int>(below(names->size()))) = any_value_name();
    }
    return true;
  }
  bool node_op_type() {
    onnx::NodeProto* n = any_node();
    if (!n) return false;
    if (below(6) == 0) {
      const char* domains[] = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "fuzz.local"};
      n->set_domain(pick(domains));
    } else {
      n->set_op_type(pick(kOpTypes));
    }
    return true;
  }
  bool drop_node() {
    Nodes* list = any_nonempty_list();
    if (!list) return false;
    list->DeleteSubrange(static_cast<int>(below(list->size())), 1);
    return true;
  }
  bool duplicate_node() {
    Nodes* list = any_nonempty_list();
    if (!list) return false;
    const onnx::NodeProto copy = list->Get(static_cast<int>(below(list->size())));
    *list->Add() = copy;
    for (int i = list->size() - 1, to = static_cast<int>(below(list->size())); i > to; --i)
      list->SwapElements(i, i - 1);
    return true;
  }
  bool move_node() {
    Nodes* list = any_nonempty_list();
    if (!list || list->size() < 2) return false;
    list->SwapElements(static_cast<int>(below(list->size())), static_cast<int>(below(list->size())));
    return true;
  }
  bool opset_version() {
    if (model_.opset_import_size() == 0 || below(8) == 0) {
      auto* o = model_.add_opset_import();
      o->set_domain(below(2) ? "" : "ai.onnx.ml");
      o->set_version(pick(kOpsets));
      return true;
    }
    auto* o = model_.mutable_opset_import(static_cast<int>(below(model_.opset_import_size())));
    if (below(8) == 0)
      o->set_domain(below(2) ? "ai.onnx" : "com.microsoft");
    else
      o->set_version(pick(kOpsets));
    return true;
  }
  bool value_info() {
    onnx::GraphProto& g = *model_.mutable_graph();
    std::vector<onnx::ValueInfoProto*> infos;
    for (auto& v : *g.mutable_input()) infos.push_back(&v);
    for (auto& v : *g.mutable_output()) infos.push_back(&v);
    for (auto& v : *g.mutable_value_info()) infos.push_back(&v);
    if (infos.empty()) return false;
    onnx::ValueInfoProto& v = *infos[below(infos.size())];
    auto* tensor = v.mutable_type()->mutable_tensor_type();
    switch (below(4)) {
      case 0:
        tensor->set_elem_type(static_cast<int32_t>(below(24)));
        break;
      case 1:
        tensor->clear_shape();
        break;
      case 2:
        tensor->mutable_shape()->add_dim()->set_dim_param(below(2) ? "batch" : "seq");
        break;
      default: {
        auto* shape = tensor->mutable_shape();
        if (shape->dim_size() == 0)
          shape->add_dim()->set_dim_value(interesting());
        else
          shape->mutable_dim(static_cast<int>(below(shape->dim_size())))->set_dim_value(interesting());
      }
    }
    return true;
  }
  bool ir_version() {
    const int64_t versions[] = {0, 1, 3, 4, 7, 8, 9, 10, 11, 100, -1};
    model_.set_ir_version(pick(versions));
    return true;
  }

  onnx::ModelProto& model_;
  std::mt19937 rng_;
  std::vector<Nodes*> lists_;
  std::vector<onnx::TensorProto*> tensors_;
};

}  // namespace

size_t mutate_model(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto model;
  if (size == 0 || !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph())
    return LLVMFuzzerMutate(data, size, max_size);
  Mutator mutator(model, seed);
  for (int attempt = 0; attempt < 8 && !mutator.mutate_once(); ++attempt) {
  }
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace onnxtrain::fuzz
