// JsonWriter implementation: scope tracking, RFC 8259 string escaping, shortest round-trip doubles.
#include "qflow/core/json_writer.h"

#include <charconv>
#include <cmath>

#include "framework/core/utf8.h"

namespace qflow {

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t length = utf8_sequence_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

bool JsonWriter::pretty() const {
  if (indent_ <= 0) return false;
  for (const Scope& s : scopes_)
    if (s.inline_scope) return false;
  return true;
}

void JsonWriter::newline_and_indent(std::size_t depth) {
  out_ += '\n';
  out_.append(depth * static_cast<std::size_t>(indent_), ' ');
}

// Emits the separator a value needs at this point; false (and records why) on misuse.
bool JsonWriter::before_value() {
  if (!error_.empty()) return false;
  if (scopes_.empty()) {
    if (root_written_) {
      error_ = "a second top-level value was written";
      return false;
    }
    root_written_ = true;
    return true;
  }
  Scope& scope = scopes_.back();
  if (scope.is_object) {
    if (!scope.key_pending) {
      error_ = "a value inside an object was written without a key";
      return false;
    }
    scope.key_pending = false;
    return true;
  }
  if (scope.count++ > 0) out_ += pretty() ? "," : (indent_ > 0 ? ", " : ",");
  if (pretty()) newline_and_indent(scopes_.size());
  return true;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  if (!error_.empty()) return *this;
  if (scopes_.empty() || !scopes_.back().is_object || scopes_.back().key_pending) {
    error_ = "key '" + std::string(name) + "' written outside an object or after another key";
    return *this;
  }
  Scope& scope = scopes_.back();
  if (scope.count++ > 0) out_ += pretty() ? "," : (indent_ > 0 ? ", " : ",");
  if (pretty()) newline_and_indent(scopes_.size());
  append_json_string(out_, name);
  out_ += indent_ > 0 ? ": " : ":";
  scope.key_pending = true;
  return *this;
}

JsonWriter& JsonWriter::begin_object(bool inline_scope) {
  if (!before_value()) return *this;
  out_ += '{';
  scopes_.push_back({true, inline_scope, 0, false});
  return *this;
}

JsonWriter& JsonWriter::begin_array(bool inline_scope) {
  if (!before_value()) return *this;
  out_ += '[';
  scopes_.push_back({false, inline_scope, 0, false});
  return *this;
}

JsonWriter& JsonWriter::close(bool is_object) {
  if (!error_.empty()) return *this;
  if (scopes_.empty() || scopes_.back().is_object != is_object) {
    error_ = std::string("end_") + (is_object ? "object" : "array") + " does not match the open scope";
    return *this;
  }
  if (scopes_.back().key_pending) {
    error_ = "an object was closed after a key without a value";
    return *this;
  }
  const std::size_t count = scopes_.back().count;
  const bool was_pretty = pretty();
  scopes_.pop_back();
  if (was_pretty && count > 0) newline_and_indent(scopes_.size());
  out_ += is_object ? '}' : ']';
  return *this;
}

JsonWriter& JsonWriter::end_object() { return close(true); }
JsonWriter& JsonWriter::end_array() { return close(false); }

JsonWriter& JsonWriter::value(std::string_view text) {
  if (before_value()) append_json_string(out_, text);
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  if (before_value()) out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  if (!before_value()) return *this;
  if (!std::isfinite(number)) {
    out_ += "null";
    return *this;
  }
  // std::to_chars without a precision gives the shortest text that parses back exactly.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), number);
  out_.append(buffer, result.ptr);
  return *this;
}

JsonWriter& JsonWriter::write_integer(int64_t number) {
  if (before_value()) out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::write_unsigned(uint64_t number) {
  if (before_value()) out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::null() {
  if (before_value()) out_ += "null";
  return *this;
}

Expected<std::string> JsonWriter::finish() const {
  if (!error_.empty()) return internal_error("malformed JSON output: " + error_);
  if (!scopes_.empty()) return internal_error("malformed JSON output: " + std::to_string(scopes_.size()) + " scope(s) left open");
  if (!root_written_) return internal_error("malformed JSON output: nothing was written");
  return indent_ > 0 ? out_ + "\n" : out_;
}

}  // namespace qflow
