// JsonWriter: streaming JSON output with keys in call order, exact numbers and full escaping.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

// Builds one JSON document in memory. Keys appear in the order they are written, so the
// output is stable across runs (reports and golden tests diff it byte for byte).
// Misuse (a key outside an object, a value without a key, unbalanced scopes) is recorded
// and reported by finish() rather than producing malformed text.
class JsonWriter {
 public:
  // indent > 0: pretty-printed with that many spaces per level; 0: compact, one line.
  explicit JsonWriter(int indent = 2) : indent_(indent) {}

  // Inline scopes print on one line even when pretty-printing (short arrays like shapes).
  JsonWriter& begin_object(bool inline_scope = false);
  JsonWriter& end_object();
  JsonWriter& begin_array(bool inline_scope = false);
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);

  // Strings must be UTF-8; invalid sequences are written as U+FFFD so the output stays valid.
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  // Non-finite doubles have no JSON spelling and are written as null.
  JsonWriter& value(double number);
  JsonWriter& value(float number) { return value(static_cast<double>(number)); }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  JsonWriter& value(T number) {
    if constexpr (std::is_signed_v<T>) return write_integer(static_cast<int64_t>(number));
    else return write_unsigned(static_cast<uint64_t>(number));
  }
  JsonWriter& null();

  // Shorthand for key(name).value(v).
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  // The finished document (with a trailing newline when pretty-printing), or why it is not one.
  Expected<std::string> finish() const;

 private:
  struct Scope {
    bool is_object = false;
    bool inline_scope = false;
    std::size_t count = 0;
    bool key_pending = false;
  };
  JsonWriter& write_integer(int64_t number);
  JsonWriter& write_unsigned(uint64_t number);
  bool before_value();
  void newline_and_indent(std::size_t depth);
  bool pretty() const;
  JsonWriter& close(bool is_object);

  int indent_;
  std::string out_;
  std::vector<Scope> scopes_;
  bool root_written_ = false;
  std::string error_;
};

// Appends `text` as a quoted JSON string literal.
void append_json_string(std::string& out, std::string_view text);

}  // namespace qflow
