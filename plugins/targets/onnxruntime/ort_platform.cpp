// OrtPlatform: strict parsing of the onnxruntime target's platform files, and where they live.
#include "ort_platform.h"

#include <algorithm>
#include <exception>
#include <set>
#include <toml.hpp>

#include "platform_files.h"
#include "qflow/ir/operators.h"

namespace qflow {

namespace {

using plugin_support::error_at;
using plugin_support::join_set;
using plugin_support::names_from;
using plugin_support::one_line;
using plugin_support::sorted_keys;

const char* const kTopKeys =
    "activation-dtypes, cpu, int8-weight-range, name, ops, per-channel, qdq-dtypes, summary, weight-dtypes";
// The int8 path is 8-bit: ONNX Runtime's CPU selectors refuse 16-bit types in every rule that
// computes, so a platform file cannot claim them.
const std::set<std::string> kEightBit = {"int8", "uint8"};
const std::set<std::string> kQdqDtypes = {"int16", "int32", "int8", "uint16", "uint8"};

struct RuleSpelling {
  OrtUnitRule rule;
  const char* name;
  const char* only_for;  // the one op type the rule fuses, or nullptr: any op
};

const RuleSpelling kRules[] = {
    {OrtUnitRule::Conv, "conv", "Conv"},
    {OrtUnitRule::MatMul, "matmul", "MatMul"},
    {OrtUnitRule::Gemm, "gemm", "Gemm"},
    {OrtUnitRule::Binary, "binary", nullptr},
    {OrtUnitRule::Variadic, "variadic", nullptr},
    {OrtUnitRule::Unary, "unary", nullptr},
    {OrtUnitRule::SameScale, "same-scale", nullptr},
    {OrtUnitRule::Where, "where", "Where"},
    {OrtUnitRule::DequantizedInput, "dequantized-input", nullptr},
};

std::string rule_names() {
  std::string out;
  for (const RuleSpelling& r : kRules) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

Expected<std::string> string_value(const toml::value& v, const std::string& what) {
  if (!v.is_string()) return error_at(v, what + " must be a string");
  return v.as_string().str;
}

// Default-domain op types qflow computes: a name outside them is a typo, or an op no model holds.
Status check_op_name(const toml::value& at, const std::string& op) {
  static const std::vector<std::string> known = [] {
    std::vector<std::string> out;
    for (const auto& [domain, type] : builtin_operators())
      if (domain.empty()) out.push_back(type);
    return out;
  }();
  return plugin_support::check_op_key(at, op, known, "ops are ONNX op types of the default domain");
}

Expected<OrtUnitRule> parse_rule(const std::string& op, const toml::value& v) {
  if (!v.is_string()) return error_at(v, "ops." + op + " must be a rule name (" + rule_names() + ")");
  const std::string text = v.as_string().str;
  for (const RuleSpelling& r : kRules) {
    if (text != r.name) continue;
    if (r.only_for && op != r.only_for)
      return error_at(v, "ops." + op + ": rule '" + text + "' fuses only " + r.only_for);
    return r.rule;
  }
  return error_at(v, "ops." + op + ": unknown rule '" + text + "' (rules: " + rule_names() + ")");
}

Expected<std::map<std::string, int64_t>> parse_qdq_dtypes(const toml::value& v) {
  if (!v.is_table() || v.as_table().empty())
    return error_at(v, "qdq-dtypes must be a table { int8 = <opset>, ... } naming at least one type");
  std::map<std::string, int64_t> out;
  const toml::table& table = v.as_table();
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    if (!kQdqDtypes.count(key)) return error_at(item, "qdq-dtypes: unknown type '" + key + "' (allowed: " + join_set(kQdqDtypes) + ")");
    if (!item.is_integer() || item.as_integer() < 1)
      return error_at(item, "qdq-dtypes." + key + " must be the opset (an integer >= 1) that brought the type");
    out[key] = item.as_integer();
  }
  return out;
}

Expected<OrtPlatform> parse_platform(const toml::value& root, const std::string& name) {
  if (!root.is_table()) return error_at(root, "a platform file must be a TOML table");
  OrtPlatform platform;
  const toml::table& table = root.as_table();
  for (const char* required : {"name", "cpu", "activation-dtypes", "weight-dtypes", "int8-weight-range", "qdq-dtypes", "ops"})
    if (!table.count(required)) return error_at(root, std::string("missing key '") + required + "'");
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    if (key == "name") {
      QFLOW_ASSIGN_OR_RETURN(platform.name, string_value(item, "name"));
      if (platform.name != name) return error_at(item, "name '" + platform.name + "' does not match the file name '" + name + "'");
    } else if (key == "summary") {
      QFLOW_ASSIGN_OR_RETURN(platform.summary, string_value(item, "summary"));
    } else if (key == "cpu") {
      QFLOW_ASSIGN_OR_RETURN(platform.cpu, string_value(item, "cpu"));
      if (platform.cpu.empty()) return error_at(item, "cpu must name the CPUs the file describes");
    } else if (key == "activation-dtypes") {
      QFLOW_ASSIGN_OR_RETURN(platform.activation_dtypes, names_from(item, key, kEightBit));
    } else if (key == "weight-dtypes") {
      QFLOW_ASSIGN_OR_RETURN(platform.weight_dtypes, names_from(item, key, kEightBit));
    } else if (key == "int8-weight-range") {
      // reduce-range quantizes to [-64, 64]: a tighter limit could not be met.
      if (!item.is_integer() || item.as_integer() < 64 || item.as_integer() > 127)
        return error_at(item, "int8-weight-range must be an integer from 64 to 127 (127: no limit), got " + toml::format(item));
      platform.int8_weight_range = item.as_integer();
    } else if (key == "qdq-dtypes") {
      QFLOW_ASSIGN_OR_RETURN(platform.qdq_dtypes, parse_qdq_dtypes(item));
    } else if (key == "ops") {
      if (!item.is_table() || item.as_table().empty()) return error_at(item, "ops must be a table of op type = rule");
      const toml::table& ops = item.as_table();
      for (const std::string& op : sorted_keys(ops)) {
        QFLOW_RETURN_IF_ERROR(check_op_name(ops.at(op), op));
        QFLOW_ASSIGN_OR_RETURN(OrtUnitRule rule, parse_rule(op, ops.at(op)));
        platform.ops.emplace(op, rule);
      }
    } else if (key != "per-channel") {
      return error_at(item, "unknown key '" + key + "' (allowed: " + kTopKeys + ")");
    }
  }
  // per-channel names ops of the file's own [ops] table, so it is read after it.
  if (table.count("per-channel")) {
    const toml::value& item = table.at("per-channel");
    std::set<std::string> weighted;
    for (const auto& [op, rule] : platform.ops)
      if (rule == OrtUnitRule::Conv || rule == OrtUnitRule::MatMul || rule == OrtUnitRule::Gemm) weighted.insert(op);
    if (weighted.empty()) return error_at(item, "per-channel: no op in [ops] takes weights (conv, matmul or gemm rules)");
    QFLOW_ASSIGN_OR_RETURN(platform.per_channel, names_from(item, "per-channel", weighted));
  }
  return platform;
}

}  // namespace

const char* ort_unit_rule_name(OrtUnitRule rule) {
  for (const RuleSpelling& r : kRules)
    if (r.rule == rule) return r.name;
  return "unknown";
}

std::vector<std::string> list_ort_platforms(const std::string& directory) {
  return plugin_support::list_platform_files(directory);
}

Expected<OrtPlatform> find_ort_platform(const std::vector<std::string>& folders, const std::string& builtin_folder,
                                        const std::string& name) {
  QFLOW_ASSIGN_OR_RETURN(const std::string path,
                         plugin_support::locate_platform_file(folders, builtin_folder, name, "onnxruntime platform"));
  try {
    return parse_platform(toml::parse(path), name);
  } catch (const std::exception& e) {
    return invalid_input(one_line(e.what()));
  }
}

Expected<std::string> ort_plugin_directory() { return plugin_support::plugin_directory("onnxruntime target"); }

}  // namespace qflow
