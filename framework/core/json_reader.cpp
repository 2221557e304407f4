// parse_json: nlohmann's SAX parser building a Json document, with the checks nlohmann leaves
// to its user (duplicate keys, nesting depth) and errors placed by line and column.
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <vector>

#include "framework/core/utf8.h"
#include "qflow/core/json.h"

namespace qflow {

namespace {

constexpr std::size_t kMaxDepth = 256;

// A pointer into the text that counts what nlohmann's lexer has read through it. SAX events
// carry no position; when one arrives the count places it (the lexer reads one character at
// a time and looks ahead only inside numbers and literals, never after a string or bracket).
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* at, std::size_t* read) : at_(at), read_(read) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    ++*read_;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  std::size_t* read_;
};

// Offset of the opening quote of the string whose closing quote ends just before `end`: the
// nearest earlier '"' not escaped by an odd run of backslashes.
std::size_t string_start(std::string_view text, std::size_t end) {
  std::size_t i = end - 1;  // the closing quote
  while (i > 0) {
    --i;
    if (text[i] != '"') continue;
    std::size_t backslashes = 0;
    while (backslashes < i && text[i - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return i;
  }
  return 0;
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 2: " prefix (the position is given again, counted in characters).
std::string reason(const std::exception& error) {
  std::string_view what = error.what();
  if (what.starts_with("[json.exception.")) {
    const std::size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  if (what.starts_with("parse error")) {
    const std::size_t colon = what.find(": ");
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  // The text nlohmann quotes ("last read: '...'") may hold bytes that are not UTF-8; they are
  // shown as <0xXX> so the message stays one valid line.
  std::string message;
  for (std::size_t i = 0; i < what.size();) {
    const std::size_t length = utf8_sequence_length(what, i);
    if (length == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<unsigned char>(what[i]));
      message += hex;
      ++i;
    } else {
      message.append(what.substr(i, length));
      i += length;
    }
  }
  return message;
}

class DocumentBuilder final : public nlohmann::json_sax<Json> {
 public:
  DocumentBuilder(std::string_view text, const std::string& source, const std::size_t& read)
      : text_(text), source_(source), read_(read) {}

  Expected<Json> result() && {
    if (!status_.is_ok()) return status_;
    return std::move(root_);
  }

  bool null() override { return add(Json(nullptr)); }
  bool boolean(bool value) override { return add(Json(value)); }
  // nlohmann reads "-0" as the integer 0; it is how JsonWriter spells the double -0.0, so
  // it stays that double and keeps its sign.
  bool number_integer(number_integer_t value) override {
    return value == 0 && negative_zero() ? add(Json(-0.0)) : add(Json(value));
  }
  bool number_unsigned(number_unsigned_t value) override { return add(Json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return add(Json(value)); }
  bool string(string_t& value) override { return add(Json(std::move(value))); }
  // Only binary formats (CBOR, MessagePack, ...) produce these; JSON text cannot.
  bool binary(binary_t&) override { return fail(read_, "expected JSON text, found binary data"); }

  bool start_object(std::size_t) override {
    if (!enter(Json::object())) return false;
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    const std::size_t at = string_start(text_, read_);
    const auto [first, inserted] = keys_.back().emplace(key, at);
    if (!inserted) {
      const TextPosition p = text_position(text_, first->second);
      return fail(at, "expected unique keys, found a second '" + key + "' (first at line " + std::to_string(p.line) +
                          ", column " + std::to_string(p.column) + ")");
    }
    key_ = std::move(key);
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override { return enter(Json::array()); }
  bool end_array() override {
    open_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const Json::exception& error) override {
    // `position` counts the characters read, the offending one (or the end) last.
    return fail(position == 0 ? 0 : position - 1, reason(error));
  }

 private:
  // Whether the integer just read was written "-0". The lexer has read one character past
  // the number, unless the number ends the text.
  bool negative_zero() const {
    std::size_t end = read_;
    if (end > 0 && !(end == text_.size() && text_[end - 1] == '0')) --end;
    return end >= 2 && text_[end - 1] == '0' && text_[end - 2] == '-';
  }

  // Opens an empty object or array; its bracket was the last character read.
  bool enter(Json container) {
    if (open_.size() >= kMaxDepth)
      return fail(read_ - 1, "expected at most " + std::to_string(kMaxDepth) + " levels of nesting");
    open_.push_back(add_value(std::move(container)));
    return true;
  }

  bool add(Json value) {
    add_value(std::move(value));
    return true;
  }

  // Places `value` in the innermost open container (or as the root) and returns it there.
  Json* add_value(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      auto& items = parent.get_ref<Json::array_t&>();
      items.push_back(std::move(value));
      return &items.back();
    }
    return &parent.get_ref<Json::object_t&>().emplace(std::move(key_), std::move(value)).first->second;
  }

  bool fail(std::size_t offset, const std::string& message) {
    if (status_.is_ok()) {
      const TextPosition p = text_position(text_, std::min(offset, text_.size()));
      status_ = invalid_input(source_ + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + message);
    }
    return false;
  }

  std::string_view text_;
  const std::string& source_;
  const std::size_t& read_;
  Json root_;
  std::vector<Json*> open_;                               // innermost last
  std::vector<std::map<std::string, std::size_t>> keys_;  // per open object: key -> offset
  std::string key_;
  Status status_;
};

}  // namespace

Expected<Json> parse_json(std::string_view text, const std::string& source) {
  std::size_t read = 0;
  DocumentBuilder builder(text, source, read);
  Json::sax_parse(CountingIterator(text.data(), &read), CountingIterator(text.data() + text.size(), &read), &builder);
  return std::move(builder).result();
}

const Json* json_member(const Json& value, std::string_view key) {
  if (!value.is_object()) return nullptr;
  const auto it = value.find(key);
  return it == value.end() ? nullptr : &*it;
}

std::optional<int64_t> json_int64(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto number = value.get<uint64_t>();
    if (number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(number);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

}  // namespace qflow
