// OrtTarget: options, the check section (JSON and text), the lowering's refusals and the
// quantization rule of an ONNX Runtime platform.
#include "ort_target.h"

#include <algorithm>
#include <map>

#include "ort_units.h"
#include "platform_files.h"
#include "qflow/core/json_writer.h"
#include "qflow/onnx.h"

namespace qflow {

namespace {

constexpr const char* kDefaultPlatform = "x86_64";

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

struct Counts {
  std::size_t int8 = 0;
  std::size_t broken = 0;
  std::map<std::string, std::size_t> float_op_types;
};

Counts count(const std::vector<OrtNodePlacement>& nodes) {
  Counts c;
  for (const OrtNodePlacement& n : nodes) {
    if (n.int8) ++c.int8;
    else ++c.float_op_types[n.op_type];
    if (n.breaks_numerics) ++c.broken;
  }
  return c;
}

Expected<std::string> check_json(const std::vector<OrtNodePlacement>& nodes, const OrtPlatform& platform,
                                 const std::string& model) {
  const Counts c = count(nodes);
  JsonWriter json;
  json.begin_object();
  json.field("format", "qflow-onnxruntime-check").field("target", "onnxruntime");
  json.field("accelerator", "int8").field("fallback", "float");
  json.field("model", model).field("platform", platform.name).field("cpu", platform.cpu);
  json.field("int8_weight_range", platform.int8_weight_range);
  json.key("nodes").begin_array();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const OrtNodePlacement& n = nodes[i];
    json.begin_object(true).field("index", i).field("name", n.node).field("op_type", n.op_type);
    json.field("placement", n.int8 ? "int8" : "float").field("reason", n.reason).end_object();
  }
  json.end_array();
  json.key("summary").begin_object();
  json.field("nodes", nodes.size()).field("int8_nodes", c.int8).field("float_nodes", nodes.size() - c.int8);
  json.field("overflowing_units", c.broken);
  json.key("float_op_types").begin_object(true);
  for (const auto& [op, n] : c.float_op_types) json.field(op, n);
  json.end_object().end_object();
  json.end_object();
  return json.finish();
}

std::string check_text(const std::vector<OrtNodePlacement>& nodes, const OrtPlatform& platform, const std::string& model) {
  const Counts c = count(nodes);
  std::string text = "ONNX Runtime CPU provider: model '" + model + "', platform " + platform.name + " (" + platform.cpu + ")\n";
  text += platform.int8_weight_range < 127
              ? "int8 weights of non-depthwise Conv, MatMul and Gemm must lie in [-" +
                    std::to_string(platform.int8_weight_range) + ", " + std::to_string(platform.int8_weight_range) + "]\n\n"
              : "int8 weights: full range\n\n";
  std::size_t name_width = 4, op_width = 7;
  for (const OrtNodePlacement& n : nodes) {
    name_width = std::max(name_width, n.node.size());
    op_width = std::max(op_width, n.op_type.size());
  }
  const std::size_t index_width = std::max<std::size_t>(5, std::to_string(nodes.size()).size());
  const std::string header = pad("index", index_width) + "  " + pad("node", name_width) + "  " + pad("op type", op_width) +
                             "  placement  reason";
  text += header + "\n";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const OrtNodePlacement& n = nodes[i];
    std::string line = pad(std::to_string(i), index_width) + "  " + pad(n.node, name_width) + "  " + pad(n.op_type, op_width) +
                       "  " + pad(n.int8 ? "int8" : "float", 9);
    if (!n.reason.empty()) line += "  " + n.reason;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  text += "\nsummary:\n  nodes: " + std::to_string(nodes.size()) + " (int8 " + std::to_string(c.int8) + ", float " +
          std::to_string(nodes.size() - c.int8) + ")\n";
  if (!c.float_op_types.empty()) {
    text += "  float op types:";
    bool first = true;
    for (const auto& [op, n] : c.float_op_types) {
      text += std::string(first ? " " : ", ") + op + " " + std::to_string(n);
      first = false;
    }
    text += "\n";
  }
  text += "  units ONNX Runtime would fuse into overflowing kernels: " + std::to_string(c.broken) + "\n";
  return text;
}

}  // namespace

ComponentInfo OrtTarget::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Target;
  info.name = "onnxruntime";
  info.summary = "ONNX Runtime's CPU provider on x86-64: int8 placement of QDQ node units with the failed constraint, "
                 "<name>_ort_model.onnx";
  info.options = {
      {"platform", OptionType::String, std::string(kDefaultPlatform),
       "ONNX Runtime platform: NAME.toml on the platform search path (built in: x86_64, x86_64-vnni); \"\" = x86_64"},
      {"platform-dir", OptionType::String, std::string(""),
       "folders of onnxruntime platform .toml files (colon-separated), searched before $QFLOW_PLATFORM_PATH and the "
       "built-in ones"},
  };
  return info;
}

Expected<std::unique_ptr<Target>> OrtTarget::create(const Options& options) {
  std::string name = options.has("platform") ? options.get_string("platform") : std::string();
  if (name.empty()) name = kDefaultPlatform;
  const std::vector<std::string> folders =
      plugin_support::platform_search_folders(options.has("platform-dir") ? options.get_string("platform-dir") : std::string());
  QFLOW_ASSIGN_OR_RETURN(std::string plugin_dir, ort_plugin_directory());
  QFLOW_ASSIGN_OR_RETURN(OrtPlatform platform, find_ort_platform(folders, plugin_dir + "/onnxruntime-platforms", name));
  return std::unique_ptr<Target>(std::make_unique<OrtTarget>(std::move(platform)));
}

Expected<std::vector<NodeCapability>> OrtTarget::partition(const Model& ptq_model) const {
  QFLOW_ASSIGN_OR_RETURN(std::vector<OrtNodePlacement> nodes, ort_placement(ptq_model, platform_));
  std::vector<NodeCapability> out;
  out.reserve(nodes.size());
  for (OrtNodePlacement& n : nodes) out.push_back({std::move(n.node), std::move(n.op_type), n.int8, std::move(n.reason)});
  return out;
}

Expected<TargetReport> OrtTarget::check(const Model& ptq_model) const {
  QFLOW_ASSIGN_OR_RETURN(std::vector<OrtNodePlacement> nodes, ort_placement(ptq_model, platform_));
  const std::string& name = ptq_model.graph->name;
  QFLOW_ASSIGN_OR_RETURN(std::string json, check_json(nodes, platform_, name));
  return TargetReport{std::move(json), check_text(nodes, platform_, name)};
}

Expected<TargetReport> OrtTarget::estimate(const Model&, const QuantTable&) const {
  return unsupported("onnxruntime: no cost model (time the deployable in ONNX Runtime instead)");
}

Expected<std::vector<TargetArtifact>> OrtTarget::lower(const Model& ptq_model) const {
  QFLOW_ASSIGN_OR_RETURN(std::vector<std::string> types, ort_qdq_type_problems(ptq_model, platform_));
  if (!types.empty())
    return unsupported("onnxruntime: " + types.front() +
                       (types.size() > 1 ? " (and " + std::to_string(types.size() - 1) + " more)" : std::string()) +
                       "; quantize to types the platform lists in qdq-dtypes");
  QFLOW_ASSIGN_OR_RETURN(std::vector<OrtNodePlacement> nodes, ort_placement(ptq_model, platform_));
  std::vector<const OrtNodePlacement*> broken;
  for (const OrtNodePlacement& n : nodes)
    if (n.breaks_numerics) broken.push_back(&n);
  if (!broken.empty()) {
    const OrtNodePlacement& first = *broken.front();
    return unsupported("onnxruntime: node '" + first.node + "' (" + first.op_type + "): " + first.reason +
                       (broken.size() > 2   ? " (and " + std::to_string(broken.size() - 1) + " more nodes)"
                        : broken.size() == 2 ? std::string(" (and 1 more node)")
                                             : std::string()) +
                       ": ONNX Runtime would fuse them into int8 kernels that overflow, and the deployed model would "
                       "lose accuracy; quantize with reduce-range = true (or name this target in [quantization]: "
                       "target = \"onnxruntime\"), or lower for a platform without the limit (x86_64-vnni) when the "
                       "model runs only on CPUs with VNNI");
  }
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, serialize_onnx(ptq_model));
  return std::vector<TargetArtifact>{{"onnx", "_ort_model.onnx", std::move(bytes)}};
}

QuantConfig OrtTarget::quantization_rule() const {
  QuantConfig rule;
  // reduce-range quantizes int8 weights to [-64, 64], within any range a platform may state.
  if (platform_.int8_weight_range < 127) rule.model.reduce_range = true;
  return rule;
}

}  // namespace qflow
