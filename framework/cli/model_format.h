// Text and JSON spellings of IR types shared by the CLI subcommands.
#pragma once

#include <optional>
#include <string>

#include "qflow/core/json_writer.h"
#include "qflow/ir/graph.h"

namespace qflow::cli {

// "float [N, 1, 28, 28]"; unknown dimensions print as "?", unknown rank as "[?]",
// an unknown type as "?".
std::string format_value_type(const std::optional<ValueType>& type);
// An array's dtype and shape: "float [4, 3]".
std::string format_array_type(const Tensor& t);
// Writes "dtype" and "shape" fields: symbolic dims as strings, unknown dims and rank as null.
void write_value_type_json(JsonWriter& json, const std::optional<ValueType>& type);

}  // namespace qflow::cli
