// Pipeline files: TOML -> Pipeline with source positions, var overrides and ${var} substitution.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include <toml.hpp>

#include "framework/core/file_io.h"
#include "framework/core/utf8.h"
#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/pipeline_text.h"
#include "framework/quant/quantization_settings.h"

namespace qflow {

namespace {

// "${var}" or "${var:modifier}".
struct VarReference {
  std::string name;
  std::string modifier;
};

VarReference split_reference(const std::string& inside) {
  const std::size_t colon = inside.find(':');
  if (colon == std::string::npos) return {inside, ""};
  return {inside.substr(0, colon), inside.substr(colon + 1)};
}

// Modifiers of a var reference: `stem`, the file name without folders and extension
// ("models/rec.onnx" -> "rec"), for artifact names derived from the model path.
Expected<std::string> apply_modifier(const std::string& value, const std::string& modifier) {
  if (modifier.empty()) return value;
  if (modifier == "stem") return std::filesystem::path(value).stem().string();
  return invalid_input("unknown var modifier ':" + modifier + "' (allowed: :stem)");
}

using Table = toml::value::table_type;

// Line and column of values. toml11's value.location() counts the newlines from the start
// of the file on every call, which makes a parse quadratic in the file size; this index
// finds the line by binary search in the newline offsets of toml11's own copy of the text.
class PositionIndex {
 public:
  explicit PositionIndex(std::string file) : file_(std::move(file)) {}

  SourcePos operator()(const toml::value& value) const {
    const auto* region = dynamic_cast<const toml::detail::region*>(toml::detail::get_region(value));
    if (!region) {
      const toml::source_location loc = value.location();
      return SourcePos{file_, static_cast<uint32_t>(loc.line()), static_cast<uint32_t>(loc.column())};
    }
    if (region->source() != source_) index(*region);
    const auto offset = static_cast<std::size_t>(region->first() - region->begin());
    const auto line = std::upper_bound(newlines_.begin(), newlines_.end(), offset) - newlines_.begin();
    return SourcePos{file_, static_cast<uint32_t>(line + 1), static_cast<uint32_t>(region->before() + 1)};
  }

 private:
  void index(const toml::detail::region& region) const {
    source_ = region.source();
    newlines_.clear();
    for (auto it = region.begin(); it != region.end(); ++it)
      if (*it == '\n') newlines_.push_back(static_cast<std::size_t>(it - region.begin()));
  }

  std::string file_;
  // The text newlines_ indexes, held so that its address cannot be reused by another text.
  mutable toml::detail::region::source_ptr source_;
  mutable std::vector<std::size_t> newlines_;  // offsets of '\n', ascending
};

std::string toml_type_text(const toml::value& value) {
  switch (value.type()) {
    case toml::value_t::boolean: return "bool";
    case toml::value_t::integer: return "int";
    case toml::value_t::floating: return "float";
    case toml::value_t::string: return "string";
    case toml::value_t::array: return "array";
    case toml::value_t::table: return "table";
    default: return "date/time";
  }
}

// Table keys in sorted order: toml11's table is unordered, and messages must be stable.
std::vector<std::string> sorted_keys(const Table& table) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : table) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// A stage's `timeout`: seconds as a number or a string with a unit ("90s", "1.5m", "2h").
// nullopt when the text is not such a duration; the caller names the key and position.
std::optional<double> parse_duration(std::string_view text) {
  double scale = 1.0;
  if (!text.empty() && (text.back() == 's' || text.back() == 'm' || text.back() == 'h')) {
    scale = text.back() == 's' ? 1.0 : text.back() == 'm' ? 60.0 : 3600.0;
    text.remove_suffix(1);
  }
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value * scale;
}

class Parser {
 public:
  Parser(std::string path) : path_(std::move(path)), pos_of_(path_) {}

  Expected<Pipeline> parse(std::string_view text, const std::vector<std::string>& sets) {
    // TOML documents are UTF-8, and toml11 3.7 reads past its buffer when it reports invalid
    // UTF-8 inside a literal string: such files are refused before it sees them.
    if (const auto bad = first_invalid_utf8(text)) return not_utf8(text, *bad);
    toml::value root;
    try {
      std::istringstream stream{std::string(text)};
      root = toml::parse(stream, path_);
    } catch (const toml::syntax_error& e) {
      return syntax_error(e.location(), e.what());
    } catch (const toml::exception& e) {
      return syntax_error(e.location(), e.what());
    } catch (const std::exception& e) {
      return invalid_input(path_ + ": invalid TOML: " + first_line(e.what()));
    }
    try {
      return build(root, sets);
    } catch (const std::exception& e) {
      // toml11 accessors throw only on type misuse, which build() checks first; keep the
      // boundary exception-free anyway.
      return internal_error(path_ + ": " + first_line(e.what()));
    }
  }

 private:
  static std::string first_line(std::string_view text) {
    std::string line(text.substr(0, text.find('\n')));
    if (line.rfind("[error] ", 0) == 0) line.erase(0, 8);
    return line;
  }

  Status not_utf8(std::string_view text, std::size_t offset) const {
    const TextPosition at = text_position(text, offset);
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02x", static_cast<unsigned char>(text[offset]));
    const SourcePos pos{path_, static_cast<uint32_t>(at.line), static_cast<uint32_t>(at.column)};
    return invalid_input(pos.prefix() + "invalid TOML: not UTF-8 (byte " + byte + " does not start a valid sequence)");
  }

  Status syntax_error(const toml::source_location& loc, std::string_view what) const {
    const SourcePos pos{path_, static_cast<uint32_t>(loc.line()), static_cast<uint32_t>(loc.column())};
    return invalid_input(pos.prefix() + "invalid TOML: " + first_line(what));
  }

  Status error_at(const toml::value& value, const std::string& message) const {
    return invalid_input(pos_of_(value).prefix() + message);
  }

  Expected<Pipeline> build(const toml::value& root, const std::vector<std::string>& sets) {
    Pipeline pipeline;
    pipeline.path = path_;
    const Table& table = root.as_table();
    for (const std::string& key : sorted_keys(table))
      if (key != "plugins" && key != "vars" && key != "stage" && key != "quantization")
        return error_at(table.at(key),
                        "unknown top-level key '" + key + "' (allowed: plugins, quantization, stage, vars)");
    if (table.count("vars")) QFLOW_RETURN_IF_ERROR(read_vars(table.at("vars"), pipeline));
    QFLOW_RETURN_IF_ERROR(apply_var_sets(sets, pipeline));
    QFLOW_RETURN_IF_ERROR(expand_var_references(pipeline));
    vars_ = &pipeline.vars;
    if (table.count("plugins")) QFLOW_RETURN_IF_ERROR(read_plugins(table.at("plugins"), pipeline));
    if (table.count("quantization")) QFLOW_RETURN_IF_ERROR(read_quantization(table.at("quantization"), pipeline));
    QFLOW_RETURN_IF_ERROR(apply_quantization_sets(sets, pipeline));
    if (!table.count("stage")) return invalid_input(path_ + ": the pipeline has no [[stage]] tables");
    const toml::value& stages = table.at("stage");
    if (!stages.is_array()) return error_at(stages, "'stage' must be an array of tables (write [[stage]])");
    // Stages may share an id only when each has a `when`: alternatives of which a run keeps one.
    struct Seen {
      uint32_t line = 0;
      bool conditional = false;
      bool kept = false;
    };
    std::map<std::string, Seen> seen;
    std::size_t number = 0;
    for (const toml::value& stage_value : stages.as_array()) {
      ++number;
      if (!stage_value.is_table()) return error_at(stage_value, "'stage' must be an array of tables (write [[stage]])");
      QFLOW_ASSIGN_OR_RETURN(PipelineStage stage, read_stage(stage_value, number));
      const bool conditional = stage_value.as_table().count("when") > 0;
      QFLOW_ASSIGN_OR_RETURN(std::optional<std::string> skip, failed_condition(stage_value, "stage '" + stage.id + "'"));
      auto [it, first] = seen.emplace(stage.id, Seen{stage.pos.line, conditional, !skip});
      if (!first) {
        if (!conditional || !it->second.conditional)
          return invalid_input(stage.pos.prefix() + "duplicate stage id '" + stage.id + "' (first defined on line " +
                               std::to_string(it->second.line) + ")");
        if (!skip && it->second.kept)
          return invalid_input(stage.pos.prefix() + "stages '" + stage.id + "' on lines " + std::to_string(it->second.line) +
                               " and " + std::to_string(stage.pos.line) + " both run: their 'when' conditions both hold");
        it->second.kept = it->second.kept || !skip;
      }
      if (skip) pipeline.skipped.push_back(SkippedStage{stage.id, stage.pos, std::move(*skip)});
      else pipeline.stages.push_back(std::move(stage));
    }
    // An alternative that runs answers for the ones left out.
    std::erase_if(pipeline.skipped, [&](const SkippedStage& skipped) { return seen.at(skipped.id).kept; });
    return pipeline;
  }

  Status read_vars(const toml::value& vars, Pipeline& pipeline) const {
    if (!vars.is_table()) return error_at(vars, "'vars' must be a table (write [vars])");
    for (const std::string& name : sorted_keys(vars.as_table())) {
      const toml::value& value = vars.as_table().at(name);
      if (!is_identifier(name)) return error_at(value, "var name '" + name + "' must be " + std::string(kIdentifierRule));
      std::optional<OptionValue> scalar = scalar_value(value);
      if (!scalar)
        return error_at(value, "var '" + name + "' must be a string, int, float or bool, got " + toml_type_text(value));
      pipeline.vars[name] = PipelineVar{*scalar, pos_of_(value)};
    }
    return Status::ok();
  }

  static std::optional<OptionValue> scalar_value(const toml::value& value) {
    if (value.is_string()) return OptionValue(value.as_string().str);
    if (value.is_integer()) return OptionValue(static_cast<int64_t>(value.as_integer()));
    if (value.is_floating()) return OptionValue(static_cast<double>(value.as_floating()));
    if (value.is_boolean()) return OptionValue(static_cast<bool>(value.as_boolean()));
    return std::nullopt;
  }

  Status apply_var_sets(const std::vector<std::string>& sets, Pipeline& pipeline) const {
    for (const std::string& set : sets) {
      QFLOW_ASSIGN_OR_RETURN(SetArgument arg, parse_set_argument(set));
      if (!arg.stage.empty()) continue;
      auto it = pipeline.vars.find(arg.name);
      if (it == pipeline.vars.end()) {
        std::vector<std::string> names;
        for (const auto& [name, var] : pipeline.vars) names.push_back(name);
        return invalid_input("--set " + set + ": the pipeline has no var '" + arg.name + "' (vars: " +
                             (names.empty() ? std::string("none") : join(names, ", ")) + ")");
      }
      const OptionType type = option_value_type(it->second.value);
      Expected<OptionValue> value = parse_option_text(arg.value, type);
      if (!value) return value.status().with_context("--set " + set + ": var '" + arg.name + "'");
      it->second.value = std::move(*value);
    }
    return Status::ok();
  }

  // A string var may be derived from others (`name = "${model:stem}"`); expanded after --set,
  // so a var set on the command line changes the vars derived from it.
  Status expand_var_references(Pipeline& pipeline) const {
    std::map<std::string, int> state;  // 1: expanding, 2: done
    std::function<Status(const std::string&)> expand = [&](const std::string& name) -> Status {
      PipelineVar& var = pipeline.vars.at(name);
      if (state[name] == 2) return Status::ok();
      if (state[name] == 1) return invalid_input(var.pos.prefix() + "var '" + name + "' refers to itself");
      state[name] = 1;
      if (const auto* text = std::get_if<std::string>(&var.value)) {
        std::string out;
        for (std::size_t i = 0; i < text->size(); ++i) {
          if ((*text)[i] != '$' || i + 1 >= text->size() || (*text)[i + 1] != '{') {
            out += (*text)[i];
            if ((*text)[i] == '$' && i + 1 < text->size() && (*text)[i + 1] == '$') ++i;  // "$$" is one '$'
            continue;
          }
          const std::size_t close = text->find('}', i + 2);
          if (close == std::string::npos)
            return invalid_input(var.pos.prefix() + "unterminated '${' in var '" + name + "'");
          const VarReference ref = split_reference(text->substr(i + 2, close - i - 2));
          if (!pipeline.vars.count(ref.name))
            return invalid_input(var.pos.prefix() + "unknown var '" + ref.name + "' in var '" + name + "'");
          QFLOW_RETURN_IF_ERROR(expand(ref.name));
          auto value = apply_modifier(option_value_text(pipeline.vars.at(ref.name).value), ref.modifier);
          if (!value) return value.status().with_context(var.pos.prefix() + "var '" + name + "'");
          out += *value;  // var values are literal where stages use them
          i = close;
        }
        var.value = std::move(out);
      }
      state[name] = 2;
      return Status::ok();
    };
    for (const auto& [name, var] : pipeline.vars) QFLOW_RETURN_IF_ERROR(expand(name));
    return Status::ok();
  }

  // [quantization]: whole-model keys, [quantization.op-type.<Op>] and [quantization.node.<name>].
  Status read_quantization(const toml::value& value, Pipeline& pipeline) const {
    if (!value.is_table()) return error_at(value, "'quantization' must be a table (write [quantization])");
    const Table& table = value.as_table();
    for (const std::string& key : sorted_keys(table)) {
      const toml::value& item = table.at(key);
      if (key == "op-type" || key == "node") {
        if (!item.is_table()) return error_at(item, "'quantization." + key + "' must be a table of tables");
        auto& overrides = key == "op-type" ? pipeline.quantization.op_types : pipeline.quantization.nodes;
        for (const std::string& name : sorted_keys(item.as_table())) {
          const toml::value& entry = item.as_table().at(name);
          const std::string where = "quantization." + key + "." + toml_key(name);
          if (!entry.is_table()) return error_at(entry, "'" + where + "' must be a table (write [" + where + "])");
          for (const std::string& field : sorted_keys(entry.as_table()))
            QFLOW_RETURN_IF_ERROR(read_quantization_key(entry.as_table().at(field), field, where, overrides[name]));
        }
        continue;
      }
      if (key == "target" || key == "target-options") {
        QFLOW_RETURN_IF_ERROR(read_quantization_target(item, key, pipeline.quantization_target));
        continue;
      }
      QFLOW_RETURN_IF_ERROR(read_quantization_key(item, key, "quantization", pipeline.quantization.model));
    }
    return Status::ok();
  }

  // `target = "npu"`, `target-options = ["platform=gen2"]`: the target whose quantization rule
  // lies under the table; vars are substituted as in stage options.
  Status read_quantization_target(const toml::value& value, const std::string& key, QuantizationTarget& target) const {
    const std::string context = "'" + key + "' in [quantization]";
    if (key == "target") {
      if (!value.is_string()) return error_at(value, context + " must be a string, got " + toml_type_text(value));
      QFLOW_ASSIGN_OR_RETURN(target.name, substitute_text(value, context));
      target.pos = pos_of_(value);
      return Status::ok();
    }
    if (!value.is_array())
      return error_at(value, context + " must be an array of \"key=value\" strings, got " + toml_type_text(value));
    target.options.clear();
    for (const toml::value& element : value.as_array()) {
      if (!element.is_string()) return error_at(element, context + " must hold strings only, got " + toml_type_text(element));
      QFLOW_ASSIGN_OR_RETURN(std::string text, substitute_text(element, context));
      target.options.push_back(std::move(text));
    }
    target.options_pos = pos_of_(value);
    return Status::ok();
  }

  // A string value may be a var reference: `reduce-range = "${reduce-range}"` takes the var's
  // value (and type).
  Status read_quantization_key(const toml::value& value, const std::string& key, const std::string& where,
                               QuantOverride& entry) const {
    std::optional<OptionValue> scalar;
    if (value.is_string()) {
      QFLOW_ASSIGN_OR_RETURN(OptionValue substituted, substitute(value, "'" + key + "' in [" + where + "]"));
      scalar = std::move(substituted);
    } else {
      scalar = scalar_value(value);
    }
    const Status status = scalar ? set_quantization_key(entry, key, *scalar)
                                 : invalid_input("'" + key + "' must be a string, integer or bool, got " + toml_type_text(value));
    if (!status.is_ok()) return error_at(value, "in [" + where + "]: " + status.message());
    return Status::ok();
  }

  // `--set quantization.KEY=VALUE` sets a whole-model key.
  static Status apply_quantization_sets(const std::vector<std::string>& sets, Pipeline& pipeline) {
    for (const std::string& set : sets) {
      QFLOW_ASSIGN_OR_RETURN(SetArgument arg, parse_set_argument(set));
      if (arg.stage != kQuantizationSet) continue;
      if (arg.name == "target") {
        pipeline.quantization_target.name = arg.value;
        pipeline.quantization_target.pos = SourcePos{};
        continue;
      }
      if (arg.name == "target-options") {
        QFLOW_ASSIGN_OR_RETURN(OptionValue list, parse_option_text(arg.value, OptionType::StringList));
        pipeline.quantization_target.options = std::get<std::vector<std::string>>(list);
        pipeline.quantization_target.options_pos = SourcePos{};
        continue;
      }
      const auto& keys = quantization_keys();
      if (std::find(keys.begin(), keys.end(), arg.name) == keys.end())
        return invalid_input("--set " + set + ": unknown quantization key '" + arg.name + "' (allowed: " + join(keys, ", ") +
                             ", target, target-options)");
      Expected<OptionValue> value = parse_option_text(arg.value, quantization_key_type(arg.name));
      Status status = value ? set_quantization_key(pipeline.quantization.model, arg.name, *value) : value.status();
      if (!status.is_ok()) return invalid_input("--set " + set + ": " + status.message());
    }
    return Status::ok();
  }

  Status read_plugins(const toml::value& plugins, Pipeline& pipeline) const {
    if (!plugins.is_array()) return error_at(plugins, "'plugins' must be an array of strings");
    const std::filesystem::path folder = std::filesystem::absolute(std::filesystem::path(path_)).parent_path();
    for (const toml::value& entry : plugins.as_array()) {
      if (!entry.is_string()) return error_at(entry, "'plugins' must be an array of strings, got " + toml_type_text(entry));
      QFLOW_ASSIGN_OR_RETURN(std::string text, substitute_text(entry, "'plugins'"));
      pipeline.plugins.push_back((folder / text).lexically_normal().string());
    }
    return Status::ok();
  }

  Expected<PipelineStage> read_stage(const toml::value& value, std::size_t number) const {
    const Table& table = value.as_table();
    const std::string which = "stage #" + std::to_string(number);
    if (!table.count("id")) return error_at(value, which + " has no 'id'");
    const toml::value& id = table.at("id");
    if (!id.is_string()) return error_at(id, "'id' of " + which + " must be a string, got " + toml_type_text(id));
    PipelineStage stage;
    stage.id = id.as_string().str;
    stage.pos = pos_of_(id);
    if (!is_identifier(stage.id))
      return error_at(id, "stage id '" + stage.id + "' must be " + std::string(kIdentifierRule));
    const std::string where = "stage '" + stage.id + "'";
    for (const std::string& key : sorted_keys(table))
      if (key != "id" && key != "use" && key != "inputs" && key != "options" && key != "output" && key != "timeout" &&
          key != "when")
        return error_at(table.at(key), "unknown key '" + key + "' in " + where +
                                           " (allowed: id, use, inputs, options, output, timeout, when)");
    if (!table.count("use")) return error_at(id, where + " has no 'use'");
    const toml::value& use = table.at("use");
    if (!use.is_string()) return error_at(use, "'use' of " + where + " must be a string, got " + toml_type_text(use));
    QFLOW_ASSIGN_OR_RETURN(stage.use, substitute_text(use, "'use' of " + where));
    stage.use_pos = pos_of_(use);
    if (table.count("output")) {
      const toml::value& output = table.at("output");
      if (!output.is_string())
        return error_at(output, "'output' of " + where + " must be a string, got " + toml_type_text(output));
      QFLOW_ASSIGN_OR_RETURN(stage.output, substitute_text(output, "'output' of " + where));
      stage.output_pos = pos_of_(output);
      if (stage.output.empty() || stage.output == "." || stage.output == ".." ||
          stage.output.find('/') != std::string::npos || stage.output.find('\\') != std::string::npos)
        return error_at(output, "'output' of " + where + " must be a file name without folders, got '" + stage.output + "'");
    }
    if (table.count("timeout")) QFLOW_RETURN_IF_ERROR(read_timeout(table.at("timeout"), where, stage));
    if (table.count("inputs")) QFLOW_RETURN_IF_ERROR(read_inputs(table.at("inputs"), where, stage));
    if (table.count("options")) QFLOW_RETURN_IF_ERROR(read_options(table.at("options"), where, stage));
    return stage;
  }

  // `when = { target = "npu" }` or `{ target = ["npu", "x"] }`: the stage runs only when every
  // var named has one of the values given. Returns the first condition that fails, as text.
  Expected<std::optional<std::string>> failed_condition(const toml::value& stage_value, const std::string& where) const {
    const Table& table = stage_value.as_table();
    if (!table.count("when")) return std::optional<std::string>();
    const toml::value& when = table.at("when");
    const std::string what = "'when' of " + where;
    if (!when.is_table() || when.as_table().empty())
      return error_at(when, what + " must be a table of var = value or var = [values], got " + toml_type_text(when));
    for (const std::string& name : sorted_keys(when.as_table())) {
      const toml::value& expected = when.as_table().at(name);
      auto var = vars_->find(name);
      if (var == vars_->end()) {
        std::vector<std::string> names;
        for (const auto& [known, unused] : *vars_) names.push_back(known);
        return error_at(expected, "unknown var '" + name + "' in " + what + " (vars: " +
                                      (names.empty() ? std::string("none") : join(names, ", ")) + ")");
      }
      const OptionType type = option_value_type(var->second.value);
      std::vector<const toml::value*> values;
      if (expected.is_array()) {
        if (expected.as_array().empty()) return error_at(expected, what + ": var '" + name + "' lists no value");
        for (const toml::value& item : expected.as_array()) values.push_back(&item);
      } else {
        values.push_back(&expected);
      }
      bool matches = false;
      std::vector<std::string> texts;
      for (const toml::value* item : values) {
        std::optional<OptionValue> value = scalar_value(*item);
        if (value && type == OptionType::Float && option_value_type(*value) == OptionType::Int)
          value = OptionValue(static_cast<double>(std::get<int64_t>(*value)));
        if (!value || option_value_type(*value) != type)
          return error_at(*item, what + ": var '" + name + "' is " + std::string(option_type_name(type)) + ", got " +
                                     toml_type_text(*item));
        texts.push_back(quoted(*value));
        if (*value == var->second.value) matches = true;
      }
      if (!matches)
        return std::optional<std::string>(name + " = " + (texts.size() == 1 ? texts[0] : "[" + join(texts, ", ") + "]") +
                                          " (it is " + quoted(var->second.value) + ")");
    }
    return std::optional<std::string>();
  }

  static std::string quoted(const OptionValue& value) {
    return option_value_type(value) == OptionType::String ? toml_quote(std::get<std::string>(value))
                                                          : option_value_text(value);
  }

  // `timeout = 90`, `timeout = 1.5` or `timeout = "90s"` ("m", "h"): overrides --stage-timeout.
  Status read_timeout(const toml::value& value, const std::string& where, PipelineStage& stage) const {
    const std::string what = "'timeout' of " + where;
    std::optional<double> seconds;
    if (value.is_integer()) {
      seconds = static_cast<double>(value.as_integer());
    } else if (value.is_floating()) {
      seconds = value.as_floating();
    } else if (value.is_string()) {
      QFLOW_ASSIGN_OR_RETURN(std::string text, substitute_text(value, what));
      seconds = parse_duration(text);
      if (!seconds)
        return error_at(value, what + ": '" + text + "' is not a duration (seconds, or a number with s, m or h: \"90s\")");
    } else {
      return error_at(value, what + " must be a number of seconds or a string like \"90s\", got " + toml_type_text(value));
    }
    if (!(*seconds > 0.0) || !std::isfinite(*seconds)) {
      std::ostringstream text;
      text << *seconds;
      return error_at(value, what + " must be a positive number of seconds, got " + text.str());
    }
    stage.timeout = *seconds;
    stage.timeout_pos = pos_of_(value);
    return Status::ok();
  }

  Status read_inputs(const toml::value& inputs, const std::string& where, PipelineStage& stage) const {
    if (!inputs.is_table()) return error_at(inputs, "'inputs' of " + where + " must be a table, got " + toml_type_text(inputs));
    for (const std::string& key : sorted_keys(inputs.as_table())) {
      const toml::value& value = inputs.as_table().at(key);
      // A dotted key (qparams.kl = "...") is a member of a port family: TOML reads it as a
      // nested table, the port is named "qparams.kl".
      if (value.is_table()) {
        for (const std::string& label : sorted_keys(value.as_table()))
          QFLOW_RETURN_IF_ERROR(read_input(key + "." + label, value.as_table().at(label), where, stage));
        continue;
      }
      QFLOW_RETURN_IF_ERROR(read_input(key, value, where, stage));
    }
    return Status::ok();
  }

  Status read_input(const std::string& port, const toml::value& ref, const std::string& where, PipelineStage& stage) const {
    if (!ref.is_string())
      return error_at(ref, "input '" + port + "' of " + where + " must be a string \"stage-id.port\", got " +
                               toml_type_text(ref));
    const std::string text = ref.as_string().str;
    const std::size_t dot = text.find('.');
    StageInput input;
    input.stage = text.substr(0, dot);
    input.port = dot == std::string::npos ? std::string() : text.substr(dot + 1);
    input.pos = pos_of_(ref);
    if (!is_identifier(input.stage) || (dot != std::string::npos && !is_identifier(input.port)))
      return error_at(ref, "input '" + port + "' of " + where + " must be \"stage-id.port\" or \"stage-id\", got '" +
                               text + "'");
    stage.inputs[port] = std::move(input);
    return Status::ok();
  }

  Status read_options(const toml::value& options, const std::string& where, PipelineStage& stage) const {
    if (!options.is_table())
      return error_at(options, "'options' of " + where + " must be a table, got " + toml_type_text(options));
    for (const std::string& name : sorted_keys(options.as_table())) {
      const toml::value& value = options.as_table().at(name);
      const std::string context = "option '" + name + "' of " + where;
      StageOption option;
      option.pos = pos_of_(value);
      if (value.is_string()) {
        QFLOW_ASSIGN_OR_RETURN(option.value, substitute(value, context, &option.var));
      } else if (value.is_array()) {
        std::vector<std::string> list;
        for (const toml::value& element : value.as_array()) {
          if (!element.is_string())
            return error_at(element, context + " must hold strings only, got " + toml_type_text(element));
          QFLOW_ASSIGN_OR_RETURN(std::string text, substitute_text(element, context));
          list.push_back(std::move(text));
        }
        option.value = std::move(list);
      } else if (std::optional<OptionValue> scalar = scalar_value(value)) {
        option.value = *scalar;
      } else {
        return error_at(value, context + " has unsupported type " + toml_type_text(value));
      }
      stage.options[name] = std::move(option);
    }
    return Status::ok();
  }

  // "$$" is a literal '$'; "${name}" is a var; a string that is one whole reference takes
  // the var's type, so `threshold = "${t}"` stays a float; `whole_var` (when given) receives
  // that var's name.
  Expected<OptionValue> substitute(const toml::value& value, const std::string& context,
                                   std::string* whole_var = nullptr) const {
    const std::string& text = value.as_string().str;
    std::string out;
    std::size_t references = 0;
    std::optional<OptionValue> whole;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '$' || i + 1 >= text.size()) {
        out += text[i];
        continue;
      }
      if (text[i + 1] == '$') {
        out += '$';
        ++i;
        continue;
      }
      if (text[i + 1] != '{') {
        out += '$';
        continue;
      }
      const std::size_t close = text.find('}', i + 2);
      if (close == std::string::npos) return error_at(value, "unterminated '${' in " + context);
      const VarReference ref = split_reference(text.substr(i + 2, close - i - 2));
      const std::string& name = ref.name;
      auto it = vars_->find(name);
      if (it == vars_->end()) {
        std::vector<std::string> names;
        for (const auto& [var, unused] : *vars_) names.push_back(var);
        return error_at(value, "unknown var '" + name + "' in " + context + " (vars: " +
                                   (names.empty() ? std::string("none") : join(names, ", ")) + ")");
      }
      ++references;
      if (i == 0 && close + 1 == text.size() && ref.modifier.empty()) {
        whole = it->second.value;
        if (whole_var) *whole_var = name;
      }
      auto expanded = apply_modifier(option_value_text(it->second.value), ref.modifier);
      if (!expanded) return error_at(value, expanded.status().message() + " in " + context);
      out += *expanded;
      i = close;
    }
    if (references == 1 && whole) return *whole;
    return OptionValue(out);
  }

  Expected<std::string> substitute_text(const toml::value& value, const std::string& context) const {
    QFLOW_ASSIGN_OR_RETURN(OptionValue result, substitute(value, context));
    return option_value_text(result);
  }

  std::string path_;
  PositionIndex pos_of_;
  const std::map<std::string, PipelineVar>* vars_ = nullptr;
};

}  // namespace

std::string SourcePos::prefix() const {
  if (line == 0) return file.empty() ? std::string() : file + ": ";
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

Expected<Pipeline> parse_pipeline(std::string_view text, const std::string& path, const std::vector<std::string>& sets) {
  return Parser(path).parse(text, sets);
}

Expected<Pipeline> load_pipeline(const std::string& path, const std::vector<std::string>& sets) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return invalid_input(path + ": is a folder, not a pipeline file");
  QFLOW_ASSIGN_OR_RETURN(std::string text, read_file(path, int64_t{1} << 24));
  return parse_pipeline(text, path, sets);
}

}  // namespace qflow
