// Lowering of a CPU node: `cpu.<OpType>` on float (and int64) tensors with the node's
// attributes; constant inputs become constant tensors (quantized weights dequantized).
#include "lowering_context.h"

namespace qflow::lowering {

Status lower_cpu(Lowerer& l, const Node& node) {
  std::vector<int32_t> inputs;
  for (const Value* in : node.inputs()) {
    if (!in) {
      inputs.push_back(-1);
      continue;
    }
    if (l.constant(in) || l.quantized_constant(in)) {
      QFLOW_ASSIGN_OR_RETURN(int32_t c, l.cpu_constant(in));
      inputs.push_back(c);
      continue;
    }
    QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_float(in));
    inputs.push_back(x);
  }
  std::vector<int32_t> outputs;
  for (const Value* out : node.outputs()) outputs.push_back(out ? l.write_float(out) : -1);
  lowered::Op op = make_op("cpu." + node.op_type(), node, std::move(inputs), std::move(outputs));
  for (const Attribute& a : node.attributes()) {
    lowered::Attribute la;
    la.name = a.name;
    switch (a.type) {
      case AttributeType::Int: la.ints = {a.i}; break;
      case AttributeType::Ints: la.ints = a.ints; break;
      case AttributeType::Float: la.floats = {static_cast<double>(a.f)}; break;
      case AttributeType::Floats: la.floats.assign(a.floats.begin(), a.floats.end()); break;
      case AttributeType::String: la.strings = {a.s}; break;
      case AttributeType::Strings: la.strings = a.strings; break;
      default:
        return l.node_error(node, "attribute '" + a.name + "' is a tensor or graph; CPU segments take ints, floats and strings");
    }
    op.attributes.push_back(std::move(la));
  }
  l.emit(std::move(op));
  return Status::ok();
}

}  // namespace qflow::lowering
