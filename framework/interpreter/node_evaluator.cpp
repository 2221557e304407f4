// evaluate_node / can_evaluate: the SDK's one-node entry into the reference kernels.
#include "qflow/interpreter.h"

#include <string>

#include "framework/interpreter/kernel.h"
#include "framework/interpreter/kernel_registry.h"

namespace qflow {

namespace {

std::string describe_node(const Node& node) {
  const std::string domain = node.domain().empty() ? "ai.onnx" : node.domain();
  return domain + "::" + node.op_type() + " '" + node.name() + "'";
}

}  // namespace

bool can_evaluate(const Node& node, int64_t opset) {
  return opset > 0 && KernelRegistry::builtin().supports(node.domain(), node.op_type(), opset);
}

Expected<std::vector<Tensor>> evaluate_node(const Node& node, const std::vector<const Tensor*>& inputs,
                                            int64_t opset) {
  if (inputs.size() != node.inputs().size())
    return invalid_input("evaluating " + describe_node(node) + ": " + std::to_string(inputs.size()) +
                         " input tensors given for " + std::to_string(node.inputs().size()) + " inputs");
  const KernelFactory* factory = opset > 0 ? KernelRegistry::builtin().find(node.domain(), node.op_type(), opset)
                                           : nullptr;
  if (!factory)
    return unsupported("no kernel for op " + describe_node(node) + " at opset " + std::to_string(opset));
  // Every input is known here, so all are offered as constants: kernels may prepack them.
  auto kernel = (*factory)(node, opset, inputs);
  if (!kernel) return kernel.status();
  // No thread pool: KernelContext::parallel_for then runs the body inline.
  KernelContext context{node, opset, inputs, {}, nullptr};
  context.outputs.resize(node.outputs().size());
  QFLOW_RETURN_IF_ERROR((*kernel)->compute(context));
  for (std::size_t i = 0; i < node.outputs().size(); ++i)
    if (node.outputs()[i] && context.outputs[i].empty())
      return internal_error(describe_node(node) + " did not produce output " + std::to_string(i));
  return std::move(context.outputs);
}

}  // namespace qflow
