// BpuPlatform: strict parsing of the platform description files.
#include "bpu_platform.h"

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

// Which op types each constraint key applies to; a key on any other op is an error, so a
// typo or a misplaced limit never silently loosens a check.
const std::set<std::string> kKernelOps = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"};
const std::set<std::string> kDilationOps = {"Conv", "ConvTranspose", "MaxPool"};
const std::set<std::string> kChannelOps = {"Conv", "ConvTranspose", "Concat"};
const std::set<std::string> kResizeOps = {"Resize", "Upsample"};
const std::set<std::string> kMatMulOps = {"MatMul", "Gemm"};
const std::set<std::string> kResizeModes = {"cubic", "linear", "nearest"};
const std::set<std::string> kDtypeNames = {"float16", "float32", "int16", "int32", "int8", "uint16", "uint8"};

const char* const kOpKeys =
    "constant-rhs, dilation-power-of-two, dtypes, input-ranks, integer-scales, max-batch, max-channels, max-dilation, "
    "max-kernel, max-scale, max-stride, min-kernel, modes, strides";
const char* const kTopKeys = "cost, dtypes, input-ranks, max-batch, name, ops, power-of-two-scales, summary";

// The op keys a platform file may list: every operator qflow computes, spelled "Conv" in
// the default domain and "com.microsoft::Gelu" in another. A name outside the list is a
// typo or an op no model can hold, and would never match a node.
const std::vector<std::string>& known_op_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& [domain, op] : builtin_operators()) out.push_back(domain.empty() ? op : domain + "::" + op);
    return out;
  }();
  return keys;
}

Status check_op_name(const toml::value& at, const std::string& op) {
  return plugin_support::check_op_key(at, op, known_op_keys(),
                                      "operators are ONNX op types, \"domain::Op\" outside the default domain");
}

Expected<int64_t> positive_integer(const toml::value& v, const std::string& what) {
  if (!v.is_integer()) return error_at(v, what + " must be an integer");
  const int64_t n = v.as_integer();
  if (n < 1) return error_at(v, what + " must be >= 1, got " + std::to_string(n));
  return n;
}

Expected<double> positive_number(const toml::value& v, const std::string& what) {
  double x = 0.0;
  if (v.is_integer()) x = static_cast<double>(v.as_integer());
  else if (v.is_floating()) x = v.as_floating();
  else return error_at(v, what + " must be a number");
  if (!(x > 0.0) || x > 1e12) return error_at(v, what + " must be > 0 and finite, got " + toml::format(v));
  return x;
}

Expected<bool> boolean(const toml::value& v, const std::string& what) {
  if (!v.is_boolean()) return error_at(v, what + " must be true or false");
  return v.as_boolean();
}

Expected<std::vector<int64_t>> positive_integers(const toml::value& v, const std::string& what) {
  if (!v.is_array() || v.as_array().empty()) return error_at(v, what + " must be a non-empty array of integers");
  std::vector<int64_t> out;
  for (const toml::value& item : v.as_array()) {
    QFLOW_ASSIGN_OR_RETURN(int64_t n, positive_integer(item, what + " element"));
    if (std::find(out.begin(), out.end(), n) != out.end())
      return error_at(item, what + " lists " + std::to_string(n) + " twice");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Expected<BpuDtypes> parse_dtypes(const toml::value& v, const std::string& what) {
  if (!v.is_table()) return error_at(v, what + " must be a table { activation = [...], weight = [...] }");
  BpuDtypes dtypes;
  const toml::table& table = v.as_table();
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    if (key == "activation") {
      QFLOW_ASSIGN_OR_RETURN(dtypes.activation, names_from(item, what + ".activation", kDtypeNames));
    } else if (key == "weight") {
      QFLOW_ASSIGN_OR_RETURN(dtypes.weight, names_from(item, what + ".weight", kDtypeNames));
    } else {
      return error_at(item, "unknown key " + what + "." + key + " (allowed: activation, weight)");
    }
  }
  return dtypes;
}

// "ops.Relu.max-kernel: max-kernel applies only to AveragePool, Conv, ...".
Status applies_to(const toml::value& item, const std::string& what, const std::string& key, const std::string& op,
                  const std::set<std::string>& ops) {
  if (ops.count(op)) return Status();
  return error_at(item, what + ": " + key + " applies only to " + join_set(ops));
}

Expected<BpuOpLimits> parse_limits(const std::string& op, const toml::value& v) {
  if (!v.is_table()) return error_at(v, "ops." + op + " must be a table of constraints ({} for none)");
  BpuOpLimits limits;
  const toml::table& table = v.as_table();
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    const std::string what = "ops." + op + "." + key;
    if (key == "max-kernel" || key == "min-kernel" || key == "max-stride") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kKernelOps));
      QFLOW_ASSIGN_OR_RETURN(int64_t n, positive_integer(item, what));
      (key == "max-kernel" ? limits.max_kernel : key == "min-kernel" ? limits.min_kernel : limits.max_stride) = n;
    } else if (key == "strides") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kKernelOps));
      QFLOW_ASSIGN_OR_RETURN(limits.strides, positive_integers(item, what));
    } else if (key == "max-dilation") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kDilationOps));
      QFLOW_ASSIGN_OR_RETURN(limits.max_dilation, positive_integer(item, what));
    } else if (key == "dilation-power-of-two") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kDilationOps));
      QFLOW_ASSIGN_OR_RETURN(limits.dilation_power_of_two, boolean(item, what));
    } else if (key == "max-channels") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kChannelOps));
      QFLOW_ASSIGN_OR_RETURN(limits.max_channels, positive_integer(item, what));
    } else if (key == "modes") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kResizeOps));
      QFLOW_ASSIGN_OR_RETURN(limits.modes, names_from(item, what, kResizeModes));
    } else if (key == "max-scale") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kResizeOps));
      QFLOW_ASSIGN_OR_RETURN(limits.max_scale, positive_number(item, what));
    } else if (key == "integer-scales") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kResizeOps));
      QFLOW_ASSIGN_OR_RETURN(limits.integer_scales, boolean(item, what));
    } else if (key == "constant-rhs") {
      QFLOW_RETURN_IF_ERROR(applies_to(item, what, key, op, kMatMulOps));
      QFLOW_ASSIGN_OR_RETURN(limits.constant_rhs, boolean(item, what));
    } else if (key == "input-ranks") {
      QFLOW_ASSIGN_OR_RETURN(limits.input_ranks, positive_integers(item, what));
    } else if (key == "max-batch") {
      QFLOW_ASSIGN_OR_RETURN(limits.max_batch, positive_integer(item, what));
    } else if (key == "dtypes") {
      QFLOW_ASSIGN_OR_RETURN(limits.dtypes, parse_dtypes(item, what));
    } else {
      return error_at(item, "unknown key " + what + " (allowed: " + kOpKeys + ")");
    }
  }
  return limits;
}

Expected<BpuCost> parse_cost(const toml::value& v) {
  if (!v.is_table()) return error_at(v, "cost must be a table (bandwidth-gbps, frequency-mhz, macs-per-cycle)");
  BpuCost cost;
  bool has_macs = false, has_frequency = false, has_bandwidth = false;
  const toml::table& table = v.as_table();
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    const std::string what = "cost." + key;
    if (key == "macs-per-cycle") {
      QFLOW_ASSIGN_OR_RETURN(cost.macs_per_cycle, positive_integer(item, what));
      has_macs = true;
    } else if (key == "frequency-mhz") {
      QFLOW_ASSIGN_OR_RETURN(cost.frequency_mhz, positive_number(item, what));
      has_frequency = true;
    } else if (key == "bandwidth-gbps") {
      QFLOW_ASSIGN_OR_RETURN(cost.bandwidth_gbps, positive_number(item, what));
      has_bandwidth = true;
    } else {
      return error_at(item, "unknown key " + what + " (allowed: bandwidth-gbps, frequency-mhz, macs-per-cycle)");
    }
  }
  if (!has_macs) return error_at(v, "cost: missing key 'macs-per-cycle'");
  if (!has_frequency) return error_at(v, "cost: missing key 'frequency-mhz'");
  if (!has_bandwidth) return error_at(v, "cost: missing key 'bandwidth-gbps'");
  return cost;
}

Expected<BpuPlatform> parse_platform(const toml::value& root, const std::string& name) {
  if (!root.is_table()) return error_at(root, "a platform file must be a TOML table");
  BpuPlatform platform;
  const toml::table& table = root.as_table();
  bool has_ops = false, has_cost = false, has_dtypes = false;
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    if (key == "name") {
      if (!item.is_string()) return error_at(item, "name must be a string");
      platform.name = item.as_string().str;
      if (platform.name != name)
        return error_at(item, "name '" + platform.name + "' does not match the file name '" + name + "'");
    } else if (key == "summary") {
      if (!item.is_string()) return error_at(item, "summary must be a string");
      platform.summary = item.as_string().str;
    } else if (key == "ops") {
      if (!item.is_table()) return error_at(item, "ops must be a table keyed by ONNX op type");
      has_ops = true;
      const toml::table& ops = item.as_table();
      for (const std::string& op : sorted_keys(ops)) {
        if (op.empty()) return error_at(ops.at(op), "ops: an op type must not be empty");
        QFLOW_RETURN_IF_ERROR(check_op_name(ops.at(op), op));
        QFLOW_ASSIGN_OR_RETURN(BpuOpLimits limits, parse_limits(op, ops.at(op)));
        platform.ops.emplace(op, limits);
      }
    } else if (key == "dtypes") {
      QFLOW_ASSIGN_OR_RETURN(platform.dtypes, parse_dtypes(item, "dtypes"));
      if (platform.dtypes.activation.empty() || platform.dtypes.weight.empty())
        return error_at(item, "dtypes must list both activation and weight types");
      has_dtypes = true;
    } else if (key == "input-ranks") {
      QFLOW_ASSIGN_OR_RETURN(platform.input_ranks, positive_integers(item, "input-ranks"));
    } else if (key == "max-batch") {
      QFLOW_ASSIGN_OR_RETURN(platform.max_batch, positive_integer(item, "max-batch"));
    } else if (key == "power-of-two-scales") {
      QFLOW_ASSIGN_OR_RETURN(platform.power_of_two_scales, boolean(item, "power-of-two-scales"));
    } else if (key == "cost") {
      QFLOW_ASSIGN_OR_RETURN(platform.cost, parse_cost(item));
      has_cost = true;
    } else {
      return error_at(item, "unknown key '" + key + "' (allowed: " + kTopKeys + ")");
    }
  }
  if (platform.name.empty()) return error_at(root, "missing key 'name'");
  if (!has_ops) return error_at(root, "missing table 'ops'");
  if (!has_dtypes) return error_at(root, "missing key 'dtypes'");
  if (!has_cost) return error_at(root, "missing table 'cost'");
  return platform;
}

}  // namespace

std::vector<std::string> list_bpu_platforms(const std::string& directory) {
  return plugin_support::list_platform_files(directory);
}

Expected<BpuPlatform> load_bpu_platform(const std::string& directory, const std::string& name) {
  return find_bpu_platform({directory}, "", name);
}

Expected<BpuPlatform> find_bpu_platform(const std::vector<std::string>& folders, const std::string& builtin_folder,
                                        const std::string& name) {
  QFLOW_ASSIGN_OR_RETURN(const std::string path,
                         plugin_support::locate_platform_file(folders, builtin_folder, name, "bpu platform"));
  try {
    const toml::value root = toml::parse(path);
    return parse_platform(root, name);
  } catch (const std::exception& e) {
    return invalid_input(one_line(e.what()));
  }
}

}  // namespace qflow
