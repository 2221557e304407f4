// Strict RFC 8259 JSON parser: recursive descent with line/column tracking and a depth limit.
#include "qflow/core/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "framework/core/utf8.h"

namespace qflow {

const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind_ != Kind::Object) return nullptr;
  const auto it = members_.find(std::string(key));
  return it == members_.end() ? nullptr : &it->second;
}

JsonValue JsonValue::null() { return JsonValue(); }

JsonValue JsonValue::boolean(bool value) {
  JsonValue v;
  v.kind_ = Kind::Bool;
  v.bool_ = value;
  return v;
}

JsonValue JsonValue::number(double value, bool is_integer, int64_t integer) {
  JsonValue v;
  v.kind_ = Kind::Number;
  v.number_ = value;
  v.is_integer_ = is_integer;
  v.integer_ = is_integer ? integer : 0;
  return v;
}

JsonValue JsonValue::string(std::string value) {
  JsonValue v;
  v.kind_ = Kind::String;
  v.string_ = std::move(value);
  return v;
}

JsonValue JsonValue::array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = Kind::Array;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(std::map<std::string, JsonValue> members) {
  JsonValue v;
  v.kind_ = Kind::Object;
  v.members_ = std::move(members);
  return v;
}

namespace {

constexpr int kMaxDepth = 256;

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  Expected<JsonValue> document() {
    skip_whitespace();
    JsonValue root;
    if (!parse_value(root, 0)) return status_;
    skip_whitespace();
    if (at_ < text_.size()) {
      fail("expected end of input after the top-level value, found " + describe_here());
      return status_;
    }
    return root;
  }

 private:
  // Records the first error at the current offset; always returns false.
  bool fail(const std::string& message) { return fail_at(at_, message); }
  bool fail_at(std::size_t offset, const std::string& message) {
    if (status_.is_ok()) {
      const TextPosition p = position(offset);
      status_ = invalid_input(source_ + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + message);
    }
    return false;
  }

  TextPosition position(std::size_t offset) const { return text_position(text_, offset); }

  // What the parser found at the current offset, for messages.
  std::string describe_here() const {
    if (at_ >= text_.size()) return "end of input";
    const auto c = static_cast<unsigned char>(text_[at_]);
    if (c >= 0x21 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char buffer[32];
    if (c < 0x80) std::snprintf(buffer, sizeof(buffer), "U+%04X", c);
    else std::snprintf(buffer, sizeof(buffer), "byte 0x%02X", c);
    return buffer;
  }

  void skip_whitespace() {
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++at_;
    }
  }

  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return fail("expected a value, found " + describe_here());
    at_ += word.size();
    return true;
  }

  bool parse_value(JsonValue& out, int depth) {
    if (at_ >= text_.size()) return fail("expected a value, found end of input");
    switch (text_[at_]) {
      case '{': return parse_object(out, depth + 1);
      case '[': return parse_array(out, depth + 1);
      case '"': {
        std::string s;
        if (!parse_string(s)) return false;
        out = JsonValue::string(std::move(s));
        return true;
      }
      case 't':
        if (!literal("true")) return false;
        out = JsonValue::boolean(true);
        return true;
      case 'f':
        if (!literal("false")) return false;
        out = JsonValue::boolean(false);
        return true;
      case 'n':
        if (!literal("null")) return false;
        out = JsonValue::null();
        return true;
      default:
        if (text_[at_] == '-' || (text_[at_] >= '0' && text_[at_] <= '9')) return parse_number(out);
        return fail("expected a value, found " + describe_here());
    }
  }

  bool parse_object(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return fail("expected at most " + std::to_string(kMaxDepth) + " levels of nesting");
    ++at_;  // '{'
    std::map<std::string, JsonValue> members;
    std::map<std::string, std::size_t> key_offsets;
    skip_whitespace();
    if (at_ < text_.size() && text_[at_] == '}') {
      ++at_;
      out = JsonValue::object(std::move(members));
      return true;
    }
    while (true) {
      skip_whitespace();
      if (at_ >= text_.size() || text_[at_] != '"') return fail("expected a string key, found " + describe_here());
      const std::size_t key_at = at_;
      std::string key;
      if (!parse_string(key)) return false;
      if (const auto it = key_offsets.find(key); it != key_offsets.end()) {
        const TextPosition first = position(it->second);
        return fail_at(key_at, "expected unique keys, found a second '" + key + "' (first at line " +
                                   std::to_string(first.line) + ", column " + std::to_string(first.column) + ")");
      }
      skip_whitespace();
      if (at_ >= text_.size() || text_[at_] != ':') return fail("expected ':' after an object key, found " + describe_here());
      ++at_;
      skip_whitespace();
      JsonValue member;
      if (!parse_value(member, depth)) return false;
      key_offsets.emplace(key, key_at);
      members.emplace(std::move(key), std::move(member));
      skip_whitespace();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == '}') {
        ++at_;
        out = JsonValue::object(std::move(members));
        return true;
      }
      return fail("expected ',' or '}' in an object, found " + describe_here());
    }
  }

  bool parse_array(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return fail("expected at most " + std::to_string(kMaxDepth) + " levels of nesting");
    ++at_;  // '['
    std::vector<JsonValue> items;
    skip_whitespace();
    if (at_ < text_.size() && text_[at_] == ']') {
      ++at_;
      out = JsonValue::array(std::move(items));
      return true;
    }
    while (true) {
      skip_whitespace();
      JsonValue item;
      if (!parse_value(item, depth)) return false;
      items.push_back(std::move(item));
      skip_whitespace();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == ']') {
        ++at_;
        out = JsonValue::array(std::move(items));
        return true;
      }
      return fail("expected ',' or ']' in an array, found " + describe_here());
    }
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // Four hex digits after "\u"; at_ is on the first digit.
  bool hex4(uint32_t& code) {
    code = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_ >= text_.size()) return fail("expected 4 hex digits after \\u, found end of input");
      const char c = text_[at_];
      uint32_t digit = 0;
      if (c >= '0' && c <= '9') digit = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<uint32_t>(c - 'A' + 10);
      else return fail("expected 4 hex digits after \\u, found " + describe_here());
      code = (code << 4) | digit;
      ++at_;
    }
    return true;
  }

  bool parse_string(std::string& out) {
    ++at_;  // opening quote
    while (true) {
      if (at_ >= text_.size()) return fail("expected '\"' to close the string, found end of input");
      const auto c = static_cast<unsigned char>(text_[at_]);
      if (c == '"') {
        ++at_;
        return true;
      }
      if (c < 0x20) return fail("expected an escape for control character " + describe_here() + " in a string");
      if (c >= 0x80) {
        const std::size_t length = utf8_sequence_length(text_, at_);
        if (length == 0) return fail("expected valid UTF-8 in a string, found " + describe_here());
        out.append(text_.substr(at_, length));
        at_ += length;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++at_;
        continue;
      }
      const std::size_t escape_at = at_;
      ++at_;
      if (at_ >= text_.size()) return fail("expected an escape character after '\\', found end of input");
      const char e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t code = 0;
          if (!hex4(code)) return false;
          if (code >= 0xDC00 && code <= 0xDFFF)
            return fail_at(escape_at, "expected a high surrogate before low surrogate \\u" + hex_code(code));
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (text_.substr(at_, 2) != "\\u")
              return fail("expected a \\uDC00-\\uDFFF low surrogate after high surrogate \\u" + hex_code(code) +
                          ", found " + describe_here());
            at_ += 2;
            uint32_t low = 0;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF)
              return fail_at(at_ - 6, "expected a \\uDC00-\\uDFFF low surrogate after high surrogate \\u" +
                                          hex_code(code) + ", found \\u" + hex_code(low));
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          at_ -= 1;
          return fail("expected an escape character (\" \\ / b f n r t u) after '\\', found " + describe_here());
      }
    }
  }

  static std::string hex_code(uint32_t code) {
    char buffer[8];
    std::snprintf(buffer, sizeof(buffer), "%04X", code);
    return buffer;
  }

  bool digits(const char* what) {
    if (at_ >= text_.size() || text_[at_] < '0' || text_[at_] > '9')
      return fail(std::string("expected a digit ") + what + ", found " + describe_here());
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
    return true;
  }

  bool parse_number(JsonValue& out) {
    const std::size_t start = at_;
    if (text_[at_] == '-') ++at_;
    if (at_ < text_.size() && text_[at_] == '0') {
      ++at_;
      if (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9')
        return fail("expected '.', 'e' or the end of the number after a leading 0, found " + describe_here());
    } else if (!digits("in a number")) {
      return false;
    }
    bool integral = true;
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      integral = false;
      if (!digits("after '.'")) return false;
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      integral = false;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (!digits("in the exponent")) return false;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + at_;
    double value = 0.0;
    const auto parsed = std::from_chars(first, last, value);
    if (parsed.ec == std::errc::result_out_of_range) {
      // Underflow rounds to zero like any other rounding; overflow has no double to become.
      if (overflows(start)) return fail_at(start, "expected a number within the range of a double, found " +
                                                      std::string(first, last));
      value = text_[start] == '-' ? -0.0 : 0.0;
    } else if (parsed.ec != std::errc() || parsed.ptr != last) {
      return fail_at(start, "expected a number, found " + std::string(first, last));
    }
    int64_t integer = 0;
    bool is_integer = false;
    if (integral) {
      const auto as_int = std::from_chars(first, last, integer);
      is_integer = as_int.ec == std::errc() && as_int.ptr == last;
    }
    out = JsonValue::number(value, is_integer, integer);
    return true;
  }

  // Whether the number text at `start` (out of double range) is too large rather than too
  // small: its decimal exponent, counted from the first significant digit, is positive.
  bool overflows(std::size_t start) const {
    std::size_t i = start;
    if (text_[i] == '-') ++i;
    int64_t position = 0;  // decimal exponent of the first significant digit, + 1
    bool seen = false;
    bool fraction = false;
    for (; i < at_ && text_[i] != 'e' && text_[i] != 'E'; ++i) {
      if (text_[i] == '.') {
        fraction = true;
        continue;
      }
      if (!seen && text_[i] == '0') {
        if (fraction) --position;
        continue;
      }
      if (!seen) seen = true;
      if (!fraction) ++position;
    }
    int64_t exponent = 0;
    if (i < at_) {
      ++i;
      bool negative = false;
      if (text_[i] == '+' || text_[i] == '-') negative = text_[i++] == '-';
      for (; i < at_; ++i) exponent = std::min<int64_t>(exponent * 10 + (text_[i] - '0'), int64_t{1} << 40);
      if (negative) exponent = -exponent;
    }
    return position + exponent > 0;
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t at_ = 0;
  Status status_;
};

}  // namespace

Expected<JsonValue> parse_json(std::string_view text, const std::string& source) {
  return Parser(text, source).document();
}

}  // namespace qflow
