// Opset upgrade: raises a model's default-domain opset (13 or later, up to 21) so that it
// computes the same numbers, rewriting each node whose op changed meaning in between.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// The versions upgrade_opset covers: libonnx's version converter stops at opset 17 and 16-bit
// QuantizeLinear/DequantizeLinear need 21.
inline constexpr int64_t kOpsetUpgradeFrom = 13;
inline constexpr int64_t kOpsetUpgradeTo = 21;

// How a default-domain op's definition changed at a version.
enum class OpChangeKind {
  Introduced,   // the op is new: no node of a model at an older opset uses it
  SameMeaning,  // more types, or optional attributes/inputs whose defaults keep older nodes' meaning
  Adapted,      // an older node means something else: an adapter rewrites it into the new form
};

struct OpChange {
  std::string_view op;
  int64_t version;
  OpChangeKind kind;
  std::string_view what;  // the change, one phrase
};

// Every default-domain operator version in (13, 21] of the ONNX operator changelog, sorted by
// version, then op.
std::span<const OpChange> opset_changes();

// Why nodes of `model` (subgraphs included) cannot be raised to `target`, one phrase each
// naming the node and the change; empty when upgrade_opset(model, target) succeeds.
std::vector<std::string> opset_upgrade_blockers(const Model& model, int64_t target);

// Raises the default-domain opset import of `model` from its version (at least 13) to `target`
// (at most 21), applying the adapter of every change in between to each node it concerns
// (docs/quantization.md lists them). Fails without touching the model when a node cannot be
// adapted or the versions are outside [13, 21]; a model already at `target` or above is left
// as it is.
Status upgrade_opset(Model& model, int64_t target);

// libonnx's version converter (framework/onnx/onnx_version.h) given the value ranks some of
// its adapters need (Softmax 12 -> 13) and shape inference cannot derive when a Reshape
// target is computed at run time: one interpreter run on zeros (dynamic dimensions 1 for the
// first axis, 64 for the others) declares them for the conversion only; the converted model
// replaces `model` and keeps no trace of them. On failure `model` is left as it was.
Status convert_opset_with_ranks(Model& model, int64_t target);

// Raises `model` to default-domain opset `target` (at most 21): below 13 with
// convert_opset_with_ranks, from 13 with upgrade_opset. A model at `target` or above is
// left as it is.
Status raise_opset(Model& model, int64_t target);

}  // namespace qflow
