// Operator schemas for libonnx's checker and shape inference: libonnx's own (opsets up to 17)
// plus the newer forms qflow writes when it raises a model to opset 21.
#pragma once

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

namespace qflow {

// libonnx's registry, answering also for the ops whose form qflow's opset upgrade
// (framework/quant/opset_upgrade.h) rewrites: Reduce* 18 (axes as an input), Split 18
// (num_outputs), DFT 20 (axis as an input) and GroupNormalization 18 and 21 (which libonnx
// 1.12 lacks). Without them the checker would judge those nodes by their older schemas.
const onnx::ISchemaRegistry* onnx_schemas();

// onnx::checker::check_model against onnx_schemas(); throws what the checker throws.
void check_model_proto(const onnx::ModelProto& proto);

}  // namespace qflow
