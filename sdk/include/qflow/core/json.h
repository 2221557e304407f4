// JSON values and a strict RFC 8259 parser, for files qflow reads back (calibration
// tables, manifests, statistics). Numbers are kept as doubles and, when integral, as int64.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

class JsonValue {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  // True when the number was written without fraction/exponent and fits int64.
  bool is_integer() const { return is_integer_; }
  int64_t as_int() const { return integer_; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  // Keys in sorted order; duplicate keys are a parse error.
  const std::map<std::string, JsonValue>& members() const { return members_; }
  // Member by key, or nullptr (also when this is not an object).
  const JsonValue* find(std::string_view key) const;

  static JsonValue null();
  static JsonValue boolean(bool value);
  static JsonValue number(double value, bool is_integer, int64_t integer);
  static JsonValue string(std::string value);
  static JsonValue array(std::vector<JsonValue> items);
  static JsonValue object(std::map<std::string, JsonValue> members);

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0.0;
  bool is_integer_ = false;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::map<std::string, JsonValue> members_;
};

// Parses one JSON document (surrounding whitespace allowed). Errors name `source`, the
// line and column, and what was expected. Nesting deeper than 256 levels is refused.
Expected<JsonValue> parse_json(std::string_view text, const std::string& source);

}  // namespace qflow
