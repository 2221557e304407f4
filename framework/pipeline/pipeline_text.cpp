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
