// Every op onnxtrain has a schema for (graph/ops/) also has a reference CPU kernel (kernels/reference/),
// and every kernel belongs to an op with a schema: adding one without the other fails here.
#include <gtest/gtest.h>

#include <set>

#include "graph/op_schema.h"
#include "kernels/kernel.h"

using namespace onnxtrain;

TEST(OpCoverage, EverySchemaHasAReferenceKernelAndBack) {
  std::set<std::pair<std::string, std::string>> schemas, kernels;
  for (const OpSchema* s : OpRegistry::builtin().all()) schemas.insert({s->domain, s->op_type});
  for (const KernelEntry* k : KernelRegistry::builtin().all()) {
    if (k->implementation == "reference" && k->device == DeviceKind::Cpu) kernels.insert({k->domain, k->op_type});
  }
  for (const auto& [domain, op] : schemas)
    EXPECT_TRUE(kernels.count({domain, op})) << op << " has a schema but no reference kernel";
  for (const auto& [domain, op] : kernels)
    EXPECT_TRUE(schemas.count({domain, op})) << op << " has a kernel but no schema";
  EXPECT_GE(schemas.size(), 87u);  // the vision and transformer op set (docs/design.md 3.2) and more
}

TEST(OpCoverage, FloatMathHasFloat32AndFloat64) {
  // Finite-difference gradient checks run in float64 on the reference kernels, so every reference kernel
  // taking float32 takes float64 too (the fast implementations may be float32 only).
  for (const KernelEntry* k : KernelRegistry::builtin().all()) {
    if (k->implementation != "reference") continue;
    const auto& d = k->dtypes;
    if (std::find(d.begin(), d.end(), DType::Float32) != d.end()) {
      EXPECT_NE(std::find(d.begin(), d.end(), DType::Float64), d.end()) << k->op_type << " has float32 but not float64";
    }
  }
}
