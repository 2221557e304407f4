// float16/bfloat16 through float32: widen inputs, compute, round outputs back.
#include "framework/interpreter/half_precision.h"

#include <string>
#include <unordered_set>

namespace qflow {

namespace {

bool is_half(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

}  // namespace

bool computes_half_in_float32(const Node& node) {
  static const std::unordered_set<std::string> moves = {
      "Cast",      "CastLike",  "Reshape",     "Shape",          "Size",      "Concat",    "Split",
      "Slice",     "Gather",    "GatherND",    "GatherElements", "Transpose", "Squeeze",   "Unsqueeze",
      "Flatten",   "Identity",  "Expand",      "Tile",           "Pad",       "DepthToSpace",
      "SpaceToDepth", "ConstantOfShape", "Constant", "ScatterND", "ScatterElements", "Where",
      "If",        "Loop",      "Scan"};
  if (!node.domain().empty() && node.domain() != "ai.onnx") return true;
  return !moves.count(node.op_type());
}

DType half_type_of(const std::vector<const Tensor*>& tensors) {
  for (const Tensor* t : tensors)
    if (t && is_half(t->dtype())) return t->dtype();
  return DType::Undefined;
}

std::vector<const Tensor*> widen_half(const std::vector<const Tensor*>& tensors, std::vector<Tensor>& widened) {
  widened.clear();
  widened.reserve(tensors.size());
  std::vector<const Tensor*> out;
  for (const Tensor* t : tensors) {
    if (t && is_half(t->dtype())) {
      widened.push_back(t->cast(DType::Float32));
      out.push_back(&widened.back());
    } else {
      out.push_back(t);
    }
  }
  return out;
}

Status compute_through_float32(const Kernel& kernel, KernelContext& context, DType half) {
  std::vector<Tensor> widened;
  const std::vector<const Tensor*> original = context.inputs;
  context.inputs = widen_half(original, widened);
  // A fused epilogue was planned for the half output; run the absorbed nodes on their own.
  const Epilogue* epilogue = context.epilogue;
  context.epilogue = nullptr;
  Status status = kernel.compute(context);
  context.inputs = original;
  context.epilogue = epilogue;
  if (!status) return status;
  for (Tensor& out : context.outputs)
    if (!out.empty() && out.dtype() == DType::Float32) out = out.cast(half);
  return Status::ok();
}

}  // namespace qflow
