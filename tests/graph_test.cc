#include "graph/graph.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <system_error>

#include "graph/atomic_file.h"
#include "graph/host_resources.h"
#include "graph/model_summary.h"
#include "graph/op_schema.h"
#include "tests/child_process.h"
#include "tests/graph_builder.h"

using namespace onnxtrain;

TEST(Shape, SymbolicArithmetic) {
  Dim n = Dim::symbol("N");
  EXPECT_EQ((n * Dim(4)).to_string(), "4*N");
  EXPECT_EQ((n * Dim(4)).divide_exact(Dim(2)).to_string(), "2*N");
  EXPECT_TRUE((n * Dim(3)).divide_exact(Dim(2)).is_unknown());
  EXPECT_EQ(*Shape({n, Dim(3)}).numel({{"N", 5}}), 15);
  EXPECT_FALSE(Shape({n, Dim(3)}).numel().has_value());
  EXPECT_EQ(Shape({n, Dim(1), Dim(28)}).to_string(), "(N,1,28)");
  EXPECT_NE(Dim::unknown(), Dim::unknown());
}

TEST(Tensor, WrapsStorageItDoesNotOwn) {
  static std::byte buffer[24];
  int released = 0;
  {
    Tensor t =
        Tensor::wrap(DType::Float32, {2, 3}, std::shared_ptr<std::byte>(buffer, [&](std::byte*) { ++released; }));
    EXPECT_EQ(t.raw(), buffer);
    EXPECT_EQ(t.nbytes(), 24u);
    t.data<float>()[5] = 2.5f;
    Tensor copy = t;  // shares the storage
    const Tensor deep = t.clone();
    EXPECT_NE(deep.raw(), buffer) << "clone owns its memory";
    EXPECT_EQ(deep.data<float>()[5], 2.5f);
    t = Tensor();
    EXPECT_EQ(released, 0) << "a copy still holds it";
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(Tensor(DType::Int64, {0}).nbytes(), 0u);
  EXPECT_EQ(Tensor(DType::Int64, {4}).data<int64_t>()[3], 0) << "zero-filled";
}

TEST(Shape, Broadcast) {
  auto s = broadcast_shapes(Shape({Dim::symbol("N"), Dim(1), Dim(5)}), Shape::of({3, 1}));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->to_string(), "(N,3,5)");
  EXPECT_FALSE(broadcast_shapes(Shape::of({2, 3}), Shape::of({4, 3})));
}

// Both sorts name a node on the cycle.
TEST(Graph, SortDetectsCycle) {
  for (void (Graph::*sort)() : {&Graph::sort, &Graph::sort_depth_first}) {
    Graph g;
    ValueId a = g.add_value({.name = "a", .dtype = DType::Float32});
    ValueId b = g.add_value({.name = "b", .dtype = DType::Float32});
    g.add_node({.name = "n1", .op_type = "Relu", .inputs = {b}, .outputs = {a}});
    g.add_node({.name = "n2", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
    try {
      (g.*sort)();
      FAIL() << "a cycle was not detected";
    } catch (const Error& e) {
      EXPECT_TRUE(e.has_node());
      EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos);
    }
  }
}

TEST(Graph, SortOrdersProducersFirst) {
  Graph g;
  ValueId x = g.add_value({.name = "x", .dtype = DType::Float32});
  ValueId a = g.add_value({.name = "a", .dtype = DType::Float32});
  ValueId b = g.add_value({.name = "b", .dtype = DType::Float32});
  NodeId second = g.add_node({.name = "second", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
  NodeId first = g.add_node({.name = "first", .op_type = "Relu", .inputs = {x}, .outputs = {a}});
  g.sort();
  ASSERT_EQ(g.order().size(), 2u);
  EXPECT_EQ(g.order()[0], first);
  EXPECT_EQ(g.order()[1], second);
}

// x -> r1 -> a, read by r2 alone; b read by r3 and r4; c read by r5 alone but a graph output too.
TEST(Graph, SoleReaderIsTheOnlyNodeReadingAValueThatIsNoGraphOutput) {
  Graph g;
  auto value = [&](const std::string& name) { return g.add_value({.name = name, .dtype = DType::Float32}); };
  const ValueId x = value("x"), a = value("a"), b = value("b"), c = value("c");
  const ValueId d = value("d"), e = value("e"), f = value("f");
  g.add_node({.name = "r1", .op_type = "Relu", .inputs = {x}, .outputs = {a}});
  const NodeId r2 = g.add_node({.name = "r2", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
  g.add_node({.name = "r3", .op_type = "Relu", .inputs = {b}, .outputs = {c}});
  g.add_node({.name = "r4", .op_type = "Relu", .inputs = {b}, .outputs = {d}});
  g.add_node({.name = "r5", .op_type = "Add", .inputs = {c, d}, .outputs = {e}});
  g.add_node({.name = "r6", .op_type = "Relu", .inputs = {e}, .outputs = {f}});
  g.outputs = {c, f};
  g.sort();
  EXPECT_EQ(g.sole_reader(a), r2);
  EXPECT_EQ(g.sole_reader(b), std::nullopt) << "two readers";
  EXPECT_EQ(g.sole_reader(c), std::nullopt) << "a graph output";
  EXPECT_EQ(g.sole_reader(f), std::nullopt) << "no reader";
}

// A chain x -> r1 -> r2 -> r3 with a weight cast appended after it and read by r3: Kahn's sort() puts the
// Cast (no producer) first; sort_depth_first() puts it right before r3 and leaves the rest in place.
TEST(Graph, SortDepthFirstPutsAnAppendedProducerBesideItsConsumer) {
  Graph g;
  auto value = [&](const std::string& name) { return g.add_value({.name = name, .dtype = DType::Float32}); };
  const ValueId x = value("x"), a = value("a"), b = value("b"), w = value("w"), wh = value("w_half"), y = value("y");
  const NodeId r1 = g.add_node({.name = "r1", .op_type = "Relu", .inputs = {x}, .outputs = {a}});
  const NodeId r2 = g.add_node({.name = "r2", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
  const NodeId r3 = g.add_node({.name = "r3", .op_type = "Add", .inputs = {b, wh}, .outputs = {y}});
  const NodeId cast = g.add_node({.name = "cast", .op_type = "Cast", .inputs = {w}, .outputs = {wh}});
  Graph kahn = g;
  kahn.sort();
  EXPECT_EQ(kahn.order(), (std::vector<NodeId>{r1, cast, r2, r3})) << "every node without a producer goes first";
  g.sort_depth_first();
  EXPECT_EQ(g.order(), (std::vector<NodeId>{r1, r2, cast, r3}));
  g.sort_depth_first();
  EXPECT_EQ(g.order(), (std::vector<NodeId>{r1, r2, cast, r3})) << "a sorted order stays as it is";
}

TEST(Shape, NumpySlice) {
  // Python: list(range(10))[2:8:3] → [2, 5]; [-3:] → 3 elements from 7; [8:2:-2] → [8, 6, 4]; [::-1] → 10.
  EXPECT_EQ(numpy_slice(2, 8, 3, 10).first, 2);
  EXPECT_EQ(numpy_slice(2, 8, 3, 10).count, 2);
  EXPECT_EQ(numpy_slice(-3, INT64_MAX, 1, 10).first, 7);
  EXPECT_EQ(numpy_slice(-3, INT64_MAX, 1, 10).count, 3);
  EXPECT_EQ(numpy_slice(8, 2, -2, 10).first, 8);
  EXPECT_EQ(numpy_slice(8, 2, -2, 10).count, 3);
  EXPECT_EQ(numpy_slice(-1, INT64_MIN, -1, 10).count, 10);
  EXPECT_EQ(numpy_slice(5, 2, 1, 10).count, 0);
  EXPECT_EQ(numpy_slice(0, 5, 1, 0).count, 0);
}

// inspect --batch 2^31 of a large model: element counts past int64 wrapped to negative FLOPs and bytes.
TEST(Shape, NumelNeverWraps) {
  const Shape huge({Dim::symbol("N"), Dim(65536), Dim(65536)});
  const SymbolBindings batch = {{"N", int64_t{1} << 31}};
  EXPECT_FALSE(huge.numel(batch).has_value()) << "2^63 elements do not fit int64";
  EXPECT_EQ(huge.numel({{"N", 4}}), int64_t{1} << 34);
  EXPECT_EQ(Shape({Dim(int64_t{1} << 40), Dim(int64_t{1} << 40), Dim(0)}).numel(), 0);
}

// A model's dims are untrusted: products and sums past int64 are the model's error, never a wrapped size.
TEST(Shape, DimArithmeticNeverWraps) {
  const Dim big(INT64_MAX / 2 + 1);
  EXPECT_THROW(big * Dim(2), Error);
  EXPECT_THROW(Dim::symbol("N", INT64_MAX / 2 + 1) * Dim(2), Error);
  EXPECT_THROW(big + big, Error);
  EXPECT_THROW(Dim(INT64_MIN) - Dim(1), Error);
  EXPECT_TRUE(Dim(INT64_MIN).divide_exact(Dim(-1)).is_unknown());
  EXPECT_TRUE(Dim(6).divide_exact(Dim(0)).is_unknown());
  EXPECT_FALSE(Dim::symbol("N", int64_t{1} << 40).evaluate({{"N", int64_t{1} << 40}}).has_value());
  EXPECT_EQ((big * Dim(1)).value(), INT64_MAX / 2 + 1);
}

// Counts beyond int64 are unknown (0), never wrapped; the same model at a batch that fits is counted exactly.
TEST(ModelSummary, FlopsAndBytesOfAHugeBatchAreNeverNegative) {
  using testing_support::add_inferred_node;
  Graph g;
  g.info.batch_symbols = {"N"};
  ValueId x = g.add_value({.name = "x",
                           .dtype = DType::Float32,
                           .shape = Shape({Dim::symbol("N"), Dim(65536), Dim(65536)}),
                           .role = ValueRole::Input});
  g.inputs.push_back(x);
  ValueId r = add_inferred_node(g, "relu", "Relu", {x}, "r");
  ValueId w = testing_support::add_parameter(g, "W", Tensor(DType::Float32, {65536, 2}));
  ValueId y = add_inferred_node(g, "mm", "MatMul", {r, w}, "y");
  g.outputs = {y};
  const ModelSummary s = summarize_model(g, int64_t{1} << 31);
  ASSERT_EQ(s.nodes.size(), 2u);
  for (const NodeSummary& n : s.nodes) {
    EXPECT_GE(n.forward_flops, 0) << n.name;
    EXPECT_GE(n.backward_flops, 0) << n.name;
    EXPECT_GE(n.activation_bytes, 0) << n.name;
    EXPECT_TRUE(std::isfinite(n.forward_flops)) << n.name;
  }
  EXPECT_EQ(s.nodes[0].activation_bytes, 0) << "2^63 elements: unknown, not wrapped";
  EXPECT_GE(s.activation_bytes, 0);
  const ModelSummary fits = summarize_model(g, 4);
  EXPECT_EQ(fits.nodes[0].forward_flops, std::ldexp(1.0, 34));
  EXPECT_EQ(fits.nodes[0].activation_bytes, int64_t{1} << 36);
}

TEST(HostResources, OutOfMemoryAndThreadFailuresAreOneLineUserErrors) {
  EXPECT_GT(physical_memory_bytes(), uint64_t{1} << 26);
  EXPECT_GT(default_thread_stack_bytes(), 0u);
  EXPECT_GT(address_space_left_bytes(), 0u);
  const auto bad_alloc = out_of_resources_message(std::bad_alloc(), "while building 1000 replicas");
  ASSERT_TRUE(bad_alloc.has_value());
  EXPECT_EQ(bad_alloc->rfind("out of memory while building 1000 replicas", 0), 0u) << *bad_alloc;
  const std::system_error no_thread(std::make_error_code(std::errc::resource_unavailable_try_again), "pthread_create");
  ASSERT_TRUE(out_of_resources_message(no_thread).has_value());
  EXPECT_NE(out_of_resources_message(no_thread)->find("cannot start a thread"), std::string::npos);
  EXPECT_FALSE(out_of_resources_message(std::runtime_error("other")).has_value());
  EXPECT_FALSE(
      out_of_resources_message(std::system_error(std::make_error_code(std::errc::permission_denied))).has_value());
  try {
    with_out_of_resources_as_error("in step 3", [] { throw std::bad_alloc(); });
    ADD_FAILURE() << "nothing thrown";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    EXPECT_EQ(std::string(e.what()).rfind("out of memory in step 3", 0), 0u) << e.what();
  }
  EXPECT_EQ(format_memory_size(uint64_t{3} << 30), "3.0 GiB");
}

namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file of `dir` (to see that no temporary is left behind).
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxtrain_atomic_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesTheWholeFileAndKeepsThePermissions) {
  const fs::path out = dir_ / "a.json";
  write_file_atomically(out.string(), "old");
  ::chmod(out.c_str(), 0640);
  write_file_atomically(out.string(), std::string(100000, 'x'));
  EXPECT_EQ(read_all(out), std::string(100000, 'x'));
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::all, fs::perms(0640));
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"a.json"});
  write_file_atomically((dir_ / "new/deeper/b.txt").string(), "b", {.create_folders = true});
  EXPECT_EQ(read_all(dir_ / "new/deeper/b.txt"), "b");
}

// A full disk (here: RLIMIT_FSIZE, EFBIG; no root needed) is "PATH: write failed: <strerror>", and the
// file it would have replaced keeps its old content; no temporary file is left.
TEST_F(AtomicFileTest, AFailedWriteIsAnErrorAndLeavesTheOldFile) {
  const fs::path out = dir_ / "plan.json";
  write_file_atomically(out.string(), "the old plan");
  const testing_support::ChildResult r = testing_support::run_in_child([&] {
    testing_support::limit_file_size(1000);
    std::string errors;
    for (bool durable : {false, true}) {
      try {
        write_file_atomically(out.string(), std::string(5000, 'n'), {.durable = durable});
        errors += "no error;";
      } catch (const Error& e) {
        errors += std::string(e.what()) + ";";
      }
    }
    try {  // piece by piece: the failing write throws, the destructor removes the temporary
      AtomicFile file(out.string());
      file.write(std::string(800, 'a'));
      file.write(std::string(800, 'b'));
      file.commit();
      errors += "no error;";
    } catch (const Error& e) {
      errors += std::string(e.what()) + ";";
    }
    return errors;
  });
  ASSERT_TRUE(r.exited) << r.describe();
  const std::string expected = out.string() + ": write failed: File too large;";
  EXPECT_EQ(r.message, expected + expected + expected);
  EXPECT_EQ(read_all(out), "the old plan");
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"plan.json"});
}

TEST_F(AtomicFileTest, NoCommitNoFile) {
  const fs::path out = dir_ / "x.npy";
  {
    AtomicFile file(out.string());
    file.write("partial");
  }  // an exception on the way: no commit
  EXPECT_TRUE(files_in(dir_).empty());
}

TEST_F(AtomicFileTest, ADeviceIsWrittenInPlaceAndItsErrorsReported) {
  const std::string e = [] {
    try {
      write_file_atomically("/dev/full", "bytes");
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  }();
  EXPECT_EQ(e, "/dev/full: write failed: No space left on device");
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  write_file_atomically("/dev/null", "fine");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A folder is no file to replace.
  EXPECT_THROW(write_file_atomically(dir_.string(), "x"), Error);
}

TEST_F(AtomicFileTest, ASymbolicLinkIsFollowed) {
  write_file_atomically((dir_ / "target.json").string(), "old");
  fs::create_symlink(dir_ / "target.json", dir_ / "link.json");
  write_file_atomically((dir_ / "link.json").string(), "new");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(read_all(dir_ / "target.json"), "new");
}

}  // namespace
