// Target: one deployment target (an accelerator family, a runtime) as one plugin component.
// In the manner of ONNX Runtime's execution providers and TVM's targets, the host asks the
// target three things about a PTQ (QDQ) model and names no target itself (docs/targets.md):
// where each node runs and why not on the accelerator, what the deployment will look like
// (check and performance sections of the report), and the deployable files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// A target's verdict for one node; `reason` names the failed constraint with the
// actual value (e.g. "Conv kernel 9x9 > 7x7") when the node is not supported.
struct NodeCapability {
  std::string node;
  std::string op_type;
  bool supported = false;
  std::string reason;
};

// One section of the report, structured and readable: the host writes `text` as the
// stage's file for people, keeps `json` as the artifact later stages and the report read.
struct TargetReport {
  std::string json;  // an object; the keys a section carries are in docs/targets.md
  std::string text;  // the same content as a plain-text file
};

// A deployable file. `role` says what it is to later stages ("program", "onnx"); the
// file is written as <model name><suffix>.
struct TargetArtifact {
  std::string role;    // kebab-case, unique per lowering
  std::string suffix;  // "_program.bin", "_ort_model.onnx"
  std::string bytes;
};

// An input or output of a deployed model: float32 of a static shape.
struct DeployedTensor {
  std::string name;
  Shape shape;
  // The array dtype the file takes for an input: UInt8 for a uint8 frame (docs/input-types.md;
  // run() still gets it as float32 tensors holding the integers), else Float32.
  DType dtype = DType::Float32;
};

// A deployable file loaded to run on the host (a simulator, or the device runtime built for
// the host). Inputs and outputs are float32 tensors, named as the PTQ model names them. One
// thread runs a loaded model at a time; load one per thread to run samples side by side.
class DeployedModel {
 public:
  virtual ~DeployedModel() = default;
  // What runs the file, for messages: "simulator", "device runtime".
  virtual std::string description() const = 0;
  virtual std::vector<DeployedTensor> inputs() const = 0;
  virtual std::vector<DeployedTensor> outputs() const = 0;
  // One sample: inputs in inputs() order, outputs in outputs() order.
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) = 0;
  // What the reference (the PTQ model) is fed for the same `inputs`: a file that converts its
  // inputs on the way in (a uint8 frame made from a float sample, docs/input-types.md) gives
  // the float tensor that frame stands for. The inputs unchanged by default.
  virtual Expected<std::vector<Tensor>> reference_inputs(const std::vector<Tensor>& inputs) const { return inputs; }
};

class Target {
 public:
  virtual ~Target() = default;
  // Per node of the PTQ model, in topological order: whether the target's accelerated
  // path runs it and, when not, the failed constraint (NodeCapability::reason).
  virtual Expected<std::vector<NodeCapability>> partition(const Model& ptq_model) const = 0;
  // The check section: placement, partition and summary of the PTQ model. The JSON object
  // has "target", "accelerator" (the placement of nodes on the accelerated path), "nodes"
  // (each with "name", "op_type", "placement", "reason") and "summary".
  virtual Expected<TargetReport> check(const Model& ptq_model) const = 0;
  // The performance section, estimated from the float model and its calibration table
  // (before the precision search decides dtypes), or unsupported() when the target has no
  // cost model.
  virtual Expected<TargetReport> estimate(const Model& float_model, const QuantTable& table) const = 0;
  // The deployable files of the PTQ model, from one lowering.
  virtual Expected<std::vector<TargetArtifact>> lower(const Model& ptq_model) const = 0;
  // The roles of lower()'s files that load() runs on the host, in the order the verify stage
  // compares them: each against the PTQ model, and every one after the first bit for bit
  // against the first (a simulator and the runtime must agree). None by default.
  virtual std::vector<std::string> runnable_roles() const { return {}; }
  // The role of a file of this target's found by its name ("m.bin" -> "program"), or "" when the
  // name is not one of its runnable files': `qflow infer` and `qflow bench` open files so.
  virtual std::string role_for_file(const std::string& path) const {
    (void)path;
    return "";
  }
  // The file of `role` (one of runnable_roles()), ready to run.
  virtual Expected<std::unique_ptr<DeployedModel>> load(const std::string& role, const std::string& bytes) const {
    (void)bytes;
    return unsupported("this target runs no deployable file on the host (role '" + role + "')");
  }
  // The quantization settings the target's kernels need of a PTQ model (e.g. int8 weights
  // within the range its integer kernels sum without overflow), as a [quantization] table of
  // its own. A pipeline whose [quantization] names the target lays this table under its own
  // keys, level by level (docs/quantization.md). Empty: the target needs nothing particular.
  virtual QuantConfig quantization_rule() const { return {}; }
  // Refuses, before anything runs, settings of the pipeline's [quantization] table (its target
  // rule merged in) that the target cannot deploy, e.g. a weight grid its kernels lack; the
  // message names the node, op type or whole-model entry and what the target supports.
  virtual Status check_quantization(const QuantConfig& config) const {
    (void)config;
    return Status::ok();
  }
};

}  // namespace qflow
