// ScatterND: y = data with each index row's slice of updates written (reduction "none") or added ("add")
// at the slice of data the row names. Every update lands in y, so d updates = GatherND(dy, indices) for
// both. With "none" the overwritten data slices do not reach y: d data = dy with those slices zeroed,
// ScatterND(dy, indices, zeros shaped like updates); with "add" d data = dy. Repeated rows under "none"
// are undefined in ONNX (the kernels keep the last write); the rule then still hands every repeated
// update its dy, as PyTorch's index_put backward does. mul, max and min have no rule yet: their gradients
// depend on the other operands and on ties. The indices are not differentiated.
#include "graph/autodiff/rules/scatter_rule.h"

namespace onnxtrain::gradient_rules {

void scatter_nd_gradient(GradientContext& ctx) { scatter_gradient(ctx, "ScatterND", "GatherND", {}); }

}  // namespace onnxtrain::gradient_rules
