// LoadCalibrator: calibration table parsing and validation, and scale extraction from QDQ models.
#include "load_calibrator.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "qflow/core/json.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

constexpr std::streamoff kMaxTableBytes = std::streamoff{1} << 30;

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Shortest text that reads back as the same double, as the table writer spells numbers.
std::string number_text(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// A float32 usable as a QuantizeLinear scale: finite, positive and normal.
bool valid_scale(float scale) { return std::isfinite(scale) && scale >= std::numeric_limits<float>::min(); }

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("load calibrator: cannot open '" + path + "': " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return io_error("load calibrator: cannot read '" + path + "'");
  if (size > kMaxTableBytes)
    return invalid_input("load calibrator: '" + path + "' is " + std::to_string(size) +
                         " bytes, more than a calibration table can be (1 GiB)");
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in.read(text.data(), size)) return io_error("load calibrator: cannot read '" + path + "'");
  return text;
}

// Checks one table entry; errors name the source, tensor and field.
Expected<QuantParams> table_entry(const Json& entry, const std::string& source, const std::string& name) {
  const std::string where = "load calibrator: " + source + ": tensor '" + name + "'";
  if (!entry.is_object()) return invalid_input(where + ": expected an object");
  auto field = [&](const char* key) -> Expected<const Json*> {
    const Json* v = json_member(entry, key);
    if (!v) return invalid_input(where + ": field '" + key + "' is missing");
    return v;
  };
  auto error = [&](const char* key, const std::string& message) {
    return invalid_input(where + ": field '" + key + "': " + message);
  };
  // A number's text for messages, or "not a number".
  auto shown = [](const Json& v) { return v.is_number() ? number_text(v.get<double>()) : std::string("not a number"); };
  QuantParams params;
  params.method = "load";

  QFLOW_ASSIGN_OR_RETURN(const Json* axis, field("axis"));
  const std::optional<int64_t> axis_value = json_int64(*axis);
  if (!axis_value || *axis_value < -1) return error("axis", "expected an integer >= -1");
  params.axis = *axis_value;

  QFLOW_ASSIGN_OR_RETURN(const Json* dtype, field("dtype"));
  if (!dtype->is_string()) return error("dtype", "expected a string");
  const std::string& dtype_text = dtype->get_ref<const std::string&>();
  const auto parsed_dtype = quant_dtype_from_name(dtype_text);
  if (!parsed_dtype) return error("dtype", "'" + dtype_text + "' is not a quantized type (int8, uint8, int16, uint16)");
  params.dtype = *parsed_dtype;

  // Optional: absent means the dtype's full range (tables written before grids narrowed).
  if (const Json* bits = json_member(entry, "bits")) {
    const std::optional<int64_t> value = json_int64(*bits);
    const int width = quant_bits(params.dtype);
    if (!value || *value < 2 || *value >= width)
      return error("bits", "expected an integer from 2 to " + std::to_string(width - 1) + " for " + dtype_text);
    params.bits = static_cast<int>(*value);
  }

  QFLOW_ASSIGN_OR_RETURN(const Json* method, field("method"));
  if (!method->is_string()) return error("method", "expected a string");

  QFLOW_ASSIGN_OR_RETURN(const Json* scale, field("scale"));
  if (!scale->is_array() || scale->empty()) return error("scale", "expected a non-empty list of numbers");
  for (std::size_t i = 0; i < scale->size(); ++i) {
    const Json& s = (*scale)[i];
    const float value = s.is_number() ? static_cast<float>(s.get<double>()) : 0.0f;
    if (!s.is_number() || !valid_scale(value))
      return error("scale", "element " + std::to_string(i) + " is " + shown(s) + ", expected a finite positive normal float32");
    params.scale.push_back(value);
  }
  if (params.axis == -1 && params.scale.size() != 1)
    return error("scale", std::to_string(params.scale.size()) + " values for a per-tensor entry (axis -1), expected 1");

  QFLOW_ASSIGN_OR_RETURN(const Json* threshold, field("threshold"));
  const double threshold_value = threshold->is_number() ? threshold->get<double>() : -1.0;
  if (!std::isfinite(threshold_value) || threshold_value < 0.0) return error("threshold", "expected a finite number >= 0");
  params.threshold = threshold_value;

  QFLOW_ASSIGN_OR_RETURN(const Json* zero_point, field("zero_point"));
  if (!zero_point->is_array()) return error("zero_point", "expected a list of integers");
  if (zero_point->size() != params.scale.size())
    return error("zero_point", std::to_string(zero_point->size()) + " values for " + std::to_string(params.scale.size()) +
                                   " scales, expected as many");
  const QuantRange range = grid_range(params);
  if (params.bits != 0 && params.scale.size() != 1)
    return error("bits", "a narrowed grid needs per-tensor parameters (one scale)");
  for (std::size_t i = 0; i < zero_point->size(); ++i) {
    const Json& z = (*zero_point)[i];
    const std::optional<int64_t> value = json_int64(z);
    if (!value || *value < range.min || *value > range.max)
      return error("zero_point", "element " + std::to_string(i) + " is " + shown(z) + ", expected an integer in [" +
                                     std::to_string(range.min) + ", " + std::to_string(range.max) + "] for " + dtype_text +
                                     (params.bits ? " (" + std::to_string(params.bits) + " bits)" : ""));
    params.zero_point.push_back(*value);
  }
  return params;
}

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// A constant tensor: an initializer that is not also a graph input (a caller may feed
// those), or the value of a Constant node.
const Tensor* constant_tensor(const Graph& graph, const Value* v) {
  if (!v) return nullptr;
  for (const Value* input : graph.inputs)
    if (input == v) return nullptr;
  if (const Tensor* t = graph.initializer(v)) return t;
  const Node* producer = v->producer();
  if (producer && producer->op_type() == "Constant" && is_default_domain(*producer))
    if (const Attribute* value = producer->find_attribute("value"); value && value->type == AttributeType::Tensor)
      return &value->t;
  return nullptr;
}

Expected<QuantParams> qdq_params(const Graph& graph, const Node& node) {
  const std::string where = "load calibrator: QuantizeLinear '" + node.name() + "' on '" + node.input(0)->name() + "'";
  const Tensor* scale = constant_tensor(graph, node.input(1));
  if (!scale) return unsupported(where + ": the scale is not a constant");
  if (!is_float(scale->dtype()))
    return invalid_input(where + ": the scale is " + std::string(dtype_name(scale->dtype())) + ", expected a float type");
  const Tensor* zero_point = node.input(2) ? constant_tensor(graph, node.input(2)) : nullptr;
  if (node.input(2) && !zero_point) return unsupported(where + ": the zero point is not a constant");
  if (scale->numel() != 1 || (zero_point && zero_point->numel() != 1))
    return unsupported(where + ": per-axis activation quantization (scale of shape " + shape_to_string(scale->shape()) +
                       ") is not supported; activations take one scale");
  QuantParams params;
  params.dtype = zero_point ? zero_point->dtype() : DType::UInt8;
  const QuantRange range = quant_range(params.dtype);
  if (range.max == 0)
    return unsupported(where + ": the zero point is " + std::string(dtype_name(params.dtype)) +
                       ", expected int8, uint8, int16 or uint16");
  const auto s = static_cast<float>(scale->to_doubles()[0]);
  if (!valid_scale(s)) return invalid_input(where + ": scale " + number_text(s) + " is not a finite positive normal float32");
  const int64_t zp = zero_point ? zero_point->to_int64s()[0] : 0;
  params.scale = {s};
  params.zero_point = {zp};
  params.axis = -1;
  params.threshold = static_cast<double>(s) * static_cast<double>(std::max(std::llabs(range.min - zp), std::llabs(range.max - zp)));
  params.method = "load";
  return params;
}

bool same_params(const QuantParams& a, const QuantParams& b) {
  return a.dtype == b.dtype && a.scale == b.scale && a.zero_point == b.zero_point && a.axis == b.axis;
}

}  // namespace

ComponentInfo LoadCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "load";
  info.summary = "Quantization parameters from a calibration table (.json) or from the QDQ pairs of the model";
  info.options = {
      {"path", OptionType::String, std::string(),
       "calibration table (.json) to load; empty: take the scales of the model's QuantizeLinear nodes"},
  };
  return info;
}

Expected<std::unique_ptr<Calibrator>> LoadCalibrator::create(const Options& options) {
  std::string path = options.get_string("path");
  if (!path.empty() && !ends_with(path, ".json"))
    return invalid_input("load calibrator: option path '" + path + "' must name a .json calibration table");
  return std::unique_ptr<Calibrator>(std::make_unique<LoadCalibrator>(std::move(path)));
}

Expected<QuantTable> LoadCalibrator::parse_table(std::string_view text, const std::string& source) {
  auto document = parse_json(text, source);
  if (!document) return document.status().with_context("load calibrator");
  const Json* tensors = json_member(*document, "tensors");
  if (!tensors || !tensors->is_object())
    return invalid_input("load calibrator: " + source + ": expected an object with a \"tensors\" object");
  QuantTable table;
  for (const auto& [name, entry] : tensors->items()) {
    QFLOW_ASSIGN_OR_RETURN(QuantParams params, table_entry(entry, source, name));
    table.emplace(name, std::move(params));
  }
  return table;
}

namespace {

// The name the quantized activation has in the float model strip-qdq makes of this one:
// the QuantizeLinear's input, except where a DequantizeLinear of it is a graph output,
// whose name the float tensor then takes (strip-qdq keeps the model's interface names).
std::string float_name(const Graph& graph, const Node& quantize) {
  for (const auto& [user, index] : quantize.output(0)->uses()) {
    (void)index;
    if (user->op_type() != "DequantizeLinear" || !user->output(0)) continue;
    for (const Value* output : graph.outputs)
      if (output == user->output(0)) return output->name();
  }
  return quantize.input(0)->name();
}

}  // namespace

Expected<QuantTable> LoadCalibrator::from_qdq_model(const Model& model) {
  const Graph& graph = *model.graph;
  QuantTable table;
  std::map<std::string, std::string> decided_by;  // tensor -> QuantizeLinear node
  int64_t quantize_nodes = 0;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() != "QuantizeLinear" || !is_default_domain(*node)) continue;
    ++quantize_nodes;
    const Value* input = node->input(0);
    if (!input || constant_tensor(graph, input)) continue;  // weights: re-quantized per channel later
    QFLOW_ASSIGN_OR_RETURN(QuantParams params, qdq_params(graph, *node));
    const std::string name = float_name(graph, *node);
    const auto [it, inserted] = table.emplace(name, params);
    if (!inserted && !same_params(it->second, params))
      return invalid_input("load calibrator: tensor '" + name + "' is quantized by QuantizeLinear '" +
                           decided_by[name] + "' and '" + node->name() + "' with different parameters");
    decided_by.emplace(name, node->name());
  }
  if (quantize_nodes == 0)
    return invalid_input("load calibrator: model '" + graph.name + "' holds no QuantizeLinear nodes and no 'path' was given");
  if (table.empty())
    return invalid_input("load calibrator: model '" + graph.name + "' quantizes only constants (" +
                         std::to_string(quantize_nodes) + " QuantizeLinear on weights): no activation scales to load");
  return table;
}

Expected<QuantTable> LoadCalibrator::calibrate(const CalibrationRequest& request) {
  if (!path_.empty()) {
    QFLOW_ASSIGN_OR_RETURN(const std::string text, read_file(path_));
    return parse_table(text, path_);
  }
  if (!request.model || !request.model->graph)
    return invalid_input("load calibrator: no 'path' was given and the stage has no model to take QDQ scales from");
  return from_qdq_model(*request.model);
}

}  // namespace qflow
