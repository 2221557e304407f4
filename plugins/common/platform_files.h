// What the built-in target plugins share about their platform files: where they are searched
// and how a TOML file's mistakes are reported. Linked statically into each plugin, so each
// .so stays as self-contained as a third-party plugin.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <toml.hpp>

#include "qflow/core/status.h"

namespace qflow::plugin_support {

// Colon-separated folders, empty entries skipped.
std::vector<std::string> split_folders(const std::string& text);

// The folders searched before a plugin's built-in platforms: those of its `platform-dir`
// option, then those of $QFLOW_PLATFORM_PATH (docs/platforms.md).
std::vector<std::string> platform_search_folders(const std::string& platform_dir);

// Absolute path of the folder holding the binary this code is linked into (the plugin .so,
// or the executable when linked statically into a test); `who` names the plugin in errors.
Expected<std::string> plugin_directory(const std::string& who);

// Lower-case letters, digits, '-' and '_': what a platform file's `name` may hold.
bool valid_platform_name(const std::string& name);

// The platforms of `directory`: its NAME.toml files' names, sorted.
std::vector<std::string> list_platform_files(const std::string& directory);

// The path of NAME.toml in the first of `folders`, then `builtin_folder` ("" for none), that
// holds it. Errors name `kind` ("bpu platform"): a name that is not valid_platform_name, or
// no such file (the folders searched, the platforms there, a did-you-mean).
Expected<std::string> locate_platform_file(const std::vector<std::string>& folders, const std::string& builtin_folder,
                                           const std::string& name, const std::string& kind);

// "file:line: message", the one-line form the CLI prints.
Status error_at(const toml::value& value, const std::string& message);

// toml11 reports syntax errors over several lines with a source excerpt; one line reads
// better after "qflow: error:".
std::string one_line(std::string text);

std::vector<std::string> sorted_keys(const toml::table& table);

// A non-empty array of distinct strings, each one of `allowed`; sorted. `what` names the key.
Expected<std::vector<std::string>> names_from(const toml::value& value, const std::string& what,
                                              const std::set<std::string>& allowed);

// An `ops` key that is not in `known` (the op types the platform may name): an error at
// `at` with a did-you-mean, or `about` (what the keys are) when nothing is close.
Status check_op_key(const toml::value& at, const std::string& op, const std::vector<std::string>& known,
                    const std::string& about);

// "a, b, c".
std::string join_set(const std::set<std::string>& items);

}  // namespace qflow::plugin_support
