// [quantization] keys: checking, setting and canonical text.
#include "framework/quant/quantization_settings.h"

#include "framework/core/text_format.h"

namespace qflow {

namespace {

bool is_16bit_dtype(DType dtype) { return dtype == DType::Int16 || dtype == DType::UInt16; }

Expected<DType> dtype_value(const std::string& key, const OptionValue& value, bool weights) {
  const std::string* text = std::get_if<std::string>(&value);
  const std::string allowed = weights ? "int8, int16" : "int8, uint8, int16, uint16";
  if (!text) return invalid_input("'" + key + "' must be a string (" + allowed + ")");
  const std::optional<DType> dtype = quant_dtype_from_name(*text);
  if (!dtype || (weights && *dtype != DType::Int8 && *dtype != DType::Int16))
    return invalid_input("'" + key + "' must be one of " + allowed + ", got '" + *text + "'");
  return *dtype;
}

Expected<bool> bool_value(const std::string& key, const OptionValue& value) {
  const bool* flag = std::get_if<bool>(&value);
  if (!flag) return invalid_input("'" + key + "' must be true or false");
  return *flag;
}

// 2..16; with a weight-dtype in the same entry the bits must fit it.
Expected<int> weight_bits_value(const std::string& key, const OptionValue& value, const QuantOverride& entry) {
  const int64_t* bits = std::get_if<int64_t>(&value);
  if (!bits || *bits < 2 || *bits > 16) return invalid_input("'" + key + "' must be an integer from 2 to 16");
  if (entry.weight_dtype && *bits > 8 && *entry.weight_dtype == DType::Int8)
    return invalid_input("'" + key + "' = " + std::to_string(*bits) + " does not fit weight-dtype int8 (2 to 8 bits)");
  return static_cast<int>(*bits);
}

// 2..16; with an 8-bit activation-dtype in the same entry the bits must fit it.
Expected<int> activation_bits_value(const std::string& key, const OptionValue& value, const QuantOverride& entry) {
  const int64_t* bits = std::get_if<int64_t>(&value);
  if (!bits || *bits < 2 || *bits > 16) return invalid_input("'" + key + "' must be an integer from 2 to 16");
  if (entry.activation_dtype && *bits > 8 && !is_16bit_dtype(*entry.activation_dtype))
    return invalid_input("'" + key + "' = " + std::to_string(*bits) + " does not fit activation-dtype " +
                         std::string(dtype_name(*entry.activation_dtype)) + " (2 to 8 bits)");
  return static_cast<int>(*bits);
}

std::string dtype_text(DType dtype) { return toml_quote(dtype_name(dtype)); }
std::string bool_text(bool value) { return value ? "true" : "false"; }

void append_table(std::string& out, const std::string& header, const QuantOverride& entry) {
  out += "[" + header + "]\n";
  for (const auto& [key, text] : quantization_fields(entry)) out += key + " = " + text + "\n";
}

}  // namespace

const std::vector<std::string>& quantization_keys() {
  static const std::vector<std::string> keys = {"activation-bits", "activation-dtype", "per-channel",
                                                "power-of-two",    "quantize",         "reduce-range",
                                                "symmetric",       "weight-bits",      "weight-dtype"};
  return keys;
}

OptionType quantization_key_type(const std::string& key) {
  if (key == "weight-bits" || key == "activation-bits") return OptionType::Int;
  return key == "activation-dtype" || key == "weight-dtype" ? OptionType::String : OptionType::Bool;
}

Status set_quantization_key(QuantOverride& entry, const std::string& key, const OptionValue& value) {
  if (key == "activation-dtype") {
    QFLOW_ASSIGN_OR_RETURN(DType dtype, dtype_value(key, value, false));
    if (entry.activation_bits && *entry.activation_bits > 8 && !is_16bit_dtype(dtype))
      return invalid_input("'activation-bits' = " + std::to_string(*entry.activation_bits) + " does not fit activation-dtype " +
                           std::string(dtype_name(dtype)) + " (2 to 8 bits)");
    entry.activation_dtype = dtype;
  } else if (key == "activation-bits") {
    QFLOW_ASSIGN_OR_RETURN(int bits, activation_bits_value(key, value, entry));
    entry.activation_bits = bits;
  } else if (key == "weight-dtype") {
    QFLOW_ASSIGN_OR_RETURN(DType dtype, dtype_value(key, value, true));
    if (entry.weight_bits && *entry.weight_bits > 8 && dtype == DType::Int8)
      return invalid_input("'weight-bits' = " + std::to_string(*entry.weight_bits) + " does not fit weight-dtype int8 (2 to 8 bits)");
    entry.weight_dtype = dtype;
  } else if (key == "weight-bits") {
    QFLOW_ASSIGN_OR_RETURN(int bits, weight_bits_value(key, value, entry));
    entry.weight_bits = bits;
  } else if (key == "symmetric" || key == "power-of-two" || key == "per-channel" || key == "reduce-range" ||
             key == "quantize") {
    QFLOW_ASSIGN_OR_RETURN(bool flag, bool_value(key, value));
    if (key == "symmetric") entry.symmetric = flag;
    if (key == "power-of-two") entry.power_of_two = flag;
    if (key == "per-channel") entry.per_channel = flag;
    if (key == "reduce-range") entry.reduce_range = flag;
    if (key == "quantize") entry.quantize = flag;
  } else {
    return invalid_input("unknown quantization key '" + key + "' (allowed: " + join(quantization_keys(), ", ") + ")");
  }
  return Status::ok();
}

std::vector<std::pair<std::string, std::string>> quantization_fields(const QuantOverride& entry) {
  std::vector<std::pair<std::string, std::string>> fields;
  if (entry.activation_bits) fields.emplace_back("activation-bits", std::to_string(*entry.activation_bits));
  if (entry.activation_dtype) fields.emplace_back("activation-dtype", dtype_text(*entry.activation_dtype));
  if (entry.per_channel) fields.emplace_back("per-channel", bool_text(*entry.per_channel));
  if (entry.power_of_two) fields.emplace_back("power-of-two", bool_text(*entry.power_of_two));
  if (entry.quantize) fields.emplace_back("quantize", bool_text(*entry.quantize));
  if (entry.reduce_range) fields.emplace_back("reduce-range", bool_text(*entry.reduce_range));
  if (entry.symmetric) fields.emplace_back("symmetric", bool_text(*entry.symmetric));
  if (entry.weight_bits) fields.emplace_back("weight-bits", std::to_string(*entry.weight_bits));
  if (entry.weight_dtype) fields.emplace_back("weight-dtype", dtype_text(*entry.weight_dtype));
  return fields;
}

std::string format_quantization(const QuantConfig& config) {
  if (config.empty()) return "";
  std::string out;
  append_table(out, "quantization", config.model);
  for (const auto& [op_type, entry] : config.op_types)
    append_table(out, "quantization.op-type." + toml_key(op_type), entry);
  for (const auto& [node, entry] : config.nodes) append_table(out, "quantization.node." + toml_key(node), entry);
  return out;
}

}  // namespace qflow
