// Text helpers for pipelines: identifiers, --set arguments, TOML quoting that round-trips.
#include "framework/pipeline/pipeline_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

bool is_identifier(std::string_view text) {
  if (text.empty() || text[0] == '-' || text[0] == '_') return false;
  return std::all_of(text.begin(), text.end(), is_word_char);
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

std::string join_and(const std::vector<std::string>& parts) {
  if (parts.size() <= 1) return join(parts, "");
  std::vector<std::string> head(parts.begin(), parts.end() - 1);
  return join(head, ", ") + " and " + parts.back();
}

Expected<SetArgument> parse_set_argument(const std::string& text) {
  const std::size_t eq = text.find('=');
  const std::string key = text.substr(0, eq);
  const std::size_t dot = key.find('.');
  SetArgument arg;
  if (dot == std::string::npos) {
    arg.name = key;
  } else {
    arg.stage = key.substr(0, dot);
    arg.name = key.substr(dot + 1);
  }
  if (eq == std::string::npos || !is_identifier(arg.name) || (dot != std::string::npos && !is_identifier(arg.stage)))
    return invalid_input("--set " + text + ": expected VAR=VALUE or STAGE.OPTION=VALUE");
  arg.value = text.substr(eq + 1);
  return arg;
}

Expected<OptionValue> parse_option_text(const std::string& text, OptionType type) {
  switch (type) {
    case OptionType::String: return OptionValue(text);
    case OptionType::StringList: {
      std::vector<std::string> list;
      if (text.empty()) return OptionValue(list);
      std::size_t start = 0;
      while (true) {
        const std::size_t comma = text.find(',', start);
        list.push_back(text.substr(start, comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      return OptionValue(list);
    }
    case OptionType::Bool:
      if (text == "true") return OptionValue(true);
      if (text == "false") return OptionValue(false);
      return invalid_input("expects bool (true or false), got '" + text + "'");
    case OptionType::Int: {
      int64_t value = 0;
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, value);
      if (text.empty() || ec != std::errc() || ptr != end) return invalid_input("expects int, got '" + text + "'");
      return OptionValue(value);
    }
    case OptionType::Float: {
      double value = 0;
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, value);
      if (text.empty() || ec != std::errc() || ptr != end) return invalid_input("expects float, got '" + text + "'");
      return OptionValue(value);
    }
  }
  return internal_error("unknown option type");
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04X", c);
          out += buffer;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string toml_key(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), is_word_char);
  return bare ? std::string(key) : toml_quote(key);
}

std::string toml_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc() ? ptr : buffer);
  // TOML needs a '.' or an exponent to read a float; "1e+20" qualifies, "3" does not.
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

std::string option_value_text(const OptionValue& value) {
  switch (option_value_type(value)) {
    case OptionType::Bool: return std::get<bool>(value) ? "true" : "false";
    case OptionType::Int: return std::to_string(std::get<int64_t>(value));
    case OptionType::Float: return toml_float(std::get<double>(value));
    case OptionType::String: return std::get<std::string>(value);
    case OptionType::StringList: return join(std::get<std::vector<std::string>>(value), ",");
  }
  return {};
}

}  // namespace qflow
