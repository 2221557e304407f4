#include "platform_files.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "qflow/core/suggest.h"

namespace qflow::plugin_support {

namespace {
// Any object defined in this binary locates it; a data object avoids casting a function
// pointer. Internal linkage: each plugin's copy finds its own .so.
const char kAnchor = 0;
}  // namespace

std::vector<std::string> split_folders(const std::string& text) {
  std::vector<std::string> folders;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(':', start), text.size());
    if (end > start) folders.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return folders;
}

std::vector<std::string> platform_search_folders(const std::string& platform_dir) {
  std::vector<std::string> folders = split_folders(platform_dir);
  if (const char* env = std::getenv("QFLOW_PLATFORM_PATH")) {
    const std::vector<std::string> more = split_folders(env);
    folders.insert(folders.end(), more.begin(), more.end());
  }
  return folders;
}

Expected<std::string> plugin_directory(const std::string& who) {
  Dl_info info{};
  if (dladdr(&kAnchor, &info) == 0 || info.dli_fname == nullptr)
    return not_found(who + ": cannot determine the path of its own library (dladdr failed)");
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(info.dli_fname, ec);
  if (ec) return io_error(who + ": cannot resolve " + info.dli_fname + ": " + ec.message());
  return path.parent_path().string();
}

bool valid_platform_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

std::vector<std::string> list_platform_files(const std::string& directory) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".toml") names.push_back(it->path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Expected<std::string> locate_platform_file(const std::vector<std::string>& folders, const std::string& builtin_folder,
                                           const std::string& name, const std::string& kind) {
  if (!valid_platform_name(name))
    return invalid_input(kind + " name '" + name + "' must use only a-z, 0-9, '-' and '_'");
  std::vector<std::string> search_path = folders;
  if (!builtin_folder.empty()) search_path.push_back(builtin_folder);
  std::error_code ec;
  for (const std::string& directory : search_path) {
    const std::filesystem::path path = std::filesystem::path(directory) / (name + ".toml");
    if (std::filesystem::is_regular_file(path, ec)) return path.string();
  }
  std::set<std::string> available;
  for (const std::string& directory : search_path)
    for (const std::string& n : list_platform_files(directory)) available.insert(n);
  // The built-in folder's absolute path says nothing a user needs; it is named as such.
  std::string searched;
  for (const std::string& directory : folders) searched += (searched.empty() ? "" : ", ") + directory;
  if (!builtin_folder.empty()) searched += searched.empty() ? "the built-in platforms" : " or the built-in platforms";
  const std::vector<std::string> close = similar_names(name, std::vector<std::string>(available.begin(), available.end()));
  std::string hint = available.empty() ? " (no platform files there)" : " (available: " + join_set(available) + ")";
  if (!close.empty()) hint += "; did you mean " + close.front() + "?";
  return not_found(kind + " '" + name + "' not found: no " + name + ".toml in " + searched + hint);
}

Status error_at(const toml::value& value, const std::string& message) {
  const toml::source_location loc = value.location();
  return invalid_input(loc.file_name() + ":" + std::to_string(loc.line()) + ": " + message);
}

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

Expected<std::vector<std::string>> names_from(const toml::value& value, const std::string& what,
                                              const std::set<std::string>& allowed) {
  if (!value.is_array() || value.as_array().empty()) return error_at(value, what + " must be a non-empty array of strings");
  std::vector<std::string> out;
  for (const toml::value& item : value.as_array()) {
    if (!item.is_string()) return error_at(item, what + " elements must be strings");
    const std::string name = item.as_string().str;
    if (!allowed.count(name)) return error_at(item, what + ": unknown value '" + name + "' (allowed: " + join_set(allowed) + ")");
    if (std::find(out.begin(), out.end(), name) != out.end()) return error_at(item, what + " lists '" + name + "' twice");
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status check_op_key(const toml::value& at, const std::string& op, const std::vector<std::string>& known,
                    const std::string& about) {
  if (std::find(known.begin(), known.end(), op) != known.end()) return Status::ok();
  const std::vector<std::string> close = similar_names(op, known);
  std::string hint = " (" + about + ")";
  if (!close.empty()) {
    hint = " (did you mean ";
    for (std::size_t i = 0; i < close.size(); ++i) hint += (i ? " or " : "") + close[i];
    hint += "?)";
  }
  return error_at(at, "ops: unknown operator '" + op + "'" + hint);
}

std::string join_set(const std::set<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace qflow::plugin_support
