// Spellings of value types for the CLI's text and JSON output.
#include "framework/cli/model_format.h"

namespace qflow::cli {

std::string format_value_type(const std::optional<ValueType>& type) {
  if (!type) return "?";
  std::string out = type->dtype == DType::Undefined ? "?" : std::string(dtype_name(type->dtype));
  if (!type->shape) return out + " [?]";
  out += " [";
  for (std::size_t i = 0; i < type->shape->size(); ++i) {
    const Dim& d = (*type->shape)[i];
    out += i ? ", " : "";
    out += d.value ? std::to_string(*d.value) : (d.param.empty() ? "?" : d.param);
  }
  return out + "]";
}

std::string format_array_type(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape());
}

void write_value_type_json(JsonWriter& json, const std::optional<ValueType>& type) {
  json.key("dtype");
  if (type && type->dtype != DType::Undefined) json.value(dtype_name(type->dtype));
  else json.null();
  json.key("shape");
  if (!type || !type->shape) {
    json.null();
    return;
  }
  json.begin_array(true);
  for (const Dim& d : *type->shape) {
    if (d.value) json.value(*d.value);
    else if (!d.param.empty()) json.value(d.param);
    else json.null();
  }
  json.end_array();
}

}  // namespace qflow::cli
