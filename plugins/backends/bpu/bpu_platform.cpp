// BpuPlatform: strict parsing of the platform description files.
#include "bpu_platform.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <set>
#include <system_error>
#include <toml.hpp>

namespace qflow {

namespace {

namespace fs = std::filesystem;

const std::set<std::string> kKernelOps = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"};
const std::set<std::string> kChannelOps = {"Conv", "ConvTranspose"};

bool valid_platform_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

// "file:line: message", the one-line form the CLI prints.
Status error_at(const toml::value& v, const std::string& message) {
  const toml::source_location loc = v.location();
  return invalid_input(loc.file_name() + ":" + std::to_string(loc.line()) + ": " + message);
}

// toml11 reports syntax errors over several lines with a source excerpt; one line reads
// better after "qflow: error:".
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  text.erase(std::unique(text.begin(), text.end(), [](char a, char b) { return a == ' ' && b == ' '; }), text.end());
  return text;
}

std::vector<std::string> sorted_keys(const toml::table& table) {
  std::vector<std::string> keys;
  for (const auto& entry : table) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  return keys;
}

Expected<int64_t> positive_integer(const toml::value& v, const std::string& what) {
  if (!v.is_integer()) return error_at(v, what + " must be an integer");
  const int64_t n = v.as_integer();
  if (n < 1) return error_at(v, what + " must be >= 1, got " + std::to_string(n));
  return n;
}

Expected<BpuOpLimits> parse_limits(const std::string& op, const toml::value& v) {
  if (!v.is_table()) return error_at(v, "ops." + op + " must be a table of limits ({} for none)");
  BpuOpLimits limits;
  const toml::table& table = v.as_table();
  for (const std::string& key : sorted_keys(table)) {
    const toml::value& item = table.at(key);
    const std::string what = "ops." + op + "." + key;
    if (key == "max-kernel" || key == "max-stride") {
      if (!kKernelOps.count(op)) return error_at(item, what + ": " + key + " applies only to ops with a kernel");
      QFLOW_ASSIGN_OR_RETURN(int64_t n, positive_integer(item, what));
      (key == "max-kernel" ? limits.max_kernel : limits.max_stride) = n;
    } else if (key == "max-channels") {
      if (!kChannelOps.count(op)) return error_at(item, what + ": max-channels applies only to Conv and ConvTranspose");
      QFLOW_ASSIGN_OR_RETURN(limits.max_channels, positive_integer(item, what));
    } else {
      return error_at(item, "unknown key " + what + " (allowed: max-channels, max-kernel, max-stride)");
    }
  }
  return limits;
}

Expected<BpuPlatform> parse_platform(const toml::value& root, const std::string& name) {
  if (!root.is_table()) return error_at(root, "a platform file must be a TOML table");
  BpuPlatform platform;
  const toml::table& table = root.as_table();
  bool has_ops = false;
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
        QFLOW_ASSIGN_OR_RETURN(BpuOpLimits limits, parse_limits(op, ops.at(op)));
        platform.ops.emplace(op, limits);
      }
    } else {
      return error_at(item, "unknown key '" + key + "' (allowed: name, ops, summary)");
    }
  }
  if (platform.name.empty()) return error_at(root, "missing key 'name'");
  if (!has_ops) return error_at(root, "missing table 'ops'");
  return platform;
}

}  // namespace

std::vector<std::string> list_bpu_platforms(const std::string& directory) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".toml") names.push_back(it->path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Expected<BpuPlatform> load_bpu_platform(const std::string& directory, const std::string& name) {
  if (!valid_platform_name(name))
    return invalid_input("bpu platform name '" + name + "' must use only a-z, 0-9, '-' and '_'");
  const fs::path path = fs::path(directory) / (name + ".toml");
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    std::string available;
    for (const std::string& n : list_bpu_platforms(directory)) available += (available.empty() ? "" : ", ") + n;
    return not_found("bpu platform '" + name + "' not found: no " + path.string() +
                     (available.empty() ? std::string(" (the folder holds no platform files)")
                                        : " (available: " + available + ")"));
  }
  try {
    const toml::value root = toml::parse(path.string());
    return parse_platform(root, name);
  } catch (const std::exception& e) {
    return invalid_input(one_line(e.what()));
  }
}

}  // namespace qflow
