// `qflow inspect`: formats compute_model_stats as an aligned text report or as JSON.
#include <algorithm>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/cli/model_format.h"
#include "qflow/core/json_writer.h"
#include "framework/ir/model_stats.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_import.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Shows a model's inputs and outputs (symbolic dimensions by name), an operator histogram,\n"
    "the parameter count (elements of all initializers, any dtype; Constant nodes excluded)\n"
    "and the multiply-accumulates (MACs) of Conv, ConvTranspose, ConvInteger, QLinearConv,\n"
    "Gemm, MatMul, MatMulInteger and QLinearMatMul nodes: one per product term of the op's sum\n"
    "(biases, activations and normalisation excluded). Shapes of intermediate values come from\n"
    "ONNX shape inference; symbolic dimensions count as 1, so MACs are per sample.";

std::string opsets_text(const Model& model) {
  std::string out;
  for (const OpsetImport& o : model.opset_imports)
    out += (out.empty() ? "" : ", ") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + " " +
           std::to_string(o.version);
  return out.empty() ? "none" : out;
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

// "-" for op types whose MACs are not counted, "?" for counted ones with unknown shapes.
std::string macs_column(const NodeStats& node) {
  if (node.macs) return std::to_string(*node.macs);
  const auto& counted = mac_counted_ops();
  return std::find(counted.begin(), counted.end(), node.op_type) != counted.end() ? "?" : "-";
}

void print_values(const char* title, const std::vector<ValueStats>& values) {
  std::cout << title << ":\n";
  std::size_t width = 0;
  for (const ValueStats& v : values) width = std::max(width, v.name.size());
  for (const ValueStats& v : values) std::cout << "  " << pad(v.name, width + 2) << format_value_type(v.type) << "\n";
}

void print_text(const std::string& path, const Model& model, const ModelStats& stats) {
  std::cout << "model: " << path << "\n"
            << "ir_version: " << model.ir_version << "\n"
            << "opsets: " << opsets_text(model) << "\n";
  if (!model.producer_name.empty())
    std::cout << "producer: " << model.producer_name
              << (model.producer_version.empty() ? "" : " " + model.producer_version) << "\n";
  std::cout << "\n";
  print_values("inputs", stats.inputs);
  print_values("outputs", stats.outputs);

  std::cout << "\noperators (" << stats.nodes.size() << " nodes):\n";
  std::size_t op_width = 0;
  for (const auto& [op, count] : stats.op_histogram) op_width = std::max(op_width, op.size());
  for (const auto& [op, count] : stats.op_histogram) std::cout << "  " << pad(op, op_width + 2) << count << "\n";

  std::cout << "\nparameters: " << stats.parameter_count << " (elements of " << stats.initializer_count
            << " initializers, " << stats.parameter_bytes << " bytes)\n";

  std::cout << "\nnodes:\n";
  std::size_t name_width = 4, type_width = 2, shape_width = 6;
  std::vector<std::string> shapes;
  for (const NodeStats& n : stats.nodes) {
    std::string shape = n.outputs.empty() ? "" : format_value_type(n.outputs[0].type);
    for (std::size_t i = 1; i < n.outputs.size(); ++i) shape += "; " + format_value_type(n.outputs[i].type);
    name_width = std::max(name_width, n.name.size());
    type_width = std::max(type_width, n.op_type.size());
    shape_width = std::max(shape_width, shape.size());
    shapes.push_back(std::move(shape));
  }
  std::cout << "  " << pad("name", name_width + 2) << pad("op", type_width + 2) << pad("output", shape_width + 2)
            << "MACs\n";
  for (std::size_t i = 0; i < stats.nodes.size(); ++i) {
    const NodeStats& n = stats.nodes[i];
    std::cout << "  " << pad(n.name, name_width + 2) << pad(n.op_type, type_width + 2)
              << pad(shapes[i], shape_width + 2) << macs_column(n) << "\n";
  }
  std::cout << "\nMACs: " << stats.total_macs;
  if (stats.symbolic_dims_in_macs) std::cout << " per sample (symbolic dimensions counted as 1)";
  if (stats.macs_unknown_nodes > 0)
    std::cout << "; " << stats.macs_unknown_nodes << " counted node(s) with unknown shapes excluded";
  std::cout << "\n";
}

void write_values_json(JsonWriter& json, const std::vector<ValueStats>& values) {
  json.begin_array();
  for (const ValueStats& v : values) {
    json.begin_object(true).field("name", v.name);
    write_value_type_json(json, v.type);
    json.end_object();
  }
  json.end_array();
}

Expected<std::string> to_json(const std::string& path, const Model& model, const ModelStats& stats) {
  JsonWriter json;
  json.begin_object();
  json.field("model", path);
  json.field("ir_version", model.ir_version);
  json.key("opsets").begin_array();
  for (const OpsetImport& o : model.opset_imports)
    json.begin_object(true).field("domain", o.domain.empty() ? "ai.onnx" : o.domain).field("version", o.version).end_object();
  json.end_array();
  json.key("producer").begin_object(true).field("name", model.producer_name).field("version", model.producer_version).end_object();
  json.key("inputs");
  write_values_json(json, stats.inputs);
  json.key("outputs");
  write_values_json(json, stats.outputs);
  json.field("node_count", stats.nodes.size());
  json.key("op_histogram").begin_object();
  for (const auto& [op, count] : stats.op_histogram) json.field(op, count);
  json.end_object();
  json.key("parameters").begin_object();
  json.field("count", stats.parameter_count);
  json.field("bytes", stats.parameter_bytes);
  json.field("initializers", stats.initializer_count);
  json.field("counts", "elements of all initializers");
  json.end_object();
  json.key("macs").begin_object();
  json.field("total", stats.total_macs);
  json.field("per_sample", stats.symbolic_dims_in_macs);
  json.field("unknown_nodes", stats.macs_unknown_nodes);
  json.key("counted_ops").begin_array(true);
  for (const std::string& op : mac_counted_ops()) json.value(op);
  json.end_array();
  json.end_object();
  json.key("nodes").begin_array();
  for (const NodeStats& n : stats.nodes) {
    json.begin_object(true).field("name", n.name).field("op_type", n.op_type);
    json.key("outputs").begin_array();
    for (const ValueStats& v : n.outputs) {
      json.begin_object().field("name", v.name);
      write_value_type_json(json, v.type);
      json.end_object();
    }
    json.end_array();
    json.key("macs");
    if (n.macs) json.value(*n.macs);
    else json.null();
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.finish();
}

}  // namespace

Status run_inspect(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the ONNX model to inspect")
      ("json", "print JSON instead of text (keys in a fixed order)");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("inspect", args, options, positional));
  if (cmd.help) {
    print_command_help("inspect MODEL [--json]", kDescription, options);
    return Status::ok();
  }
  const std::string path = cmd.values["model"].as<std::string>();
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path + ": shape inference failed"));
  QFLOW_ASSIGN_OR_RETURN(ModelStats stats, compute_model_stats(model));
  if (cmd.values.count("json")) {
    QFLOW_ASSIGN_OR_RETURN(std::string text, to_json(path, model, stats));
    std::cout << text;
  } else {
    print_text(path, model, stats);
  }
  return Status::ok();
}

}  // namespace qflow::cli
