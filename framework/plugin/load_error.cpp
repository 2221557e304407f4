// Explains the dynamic loader's refusal of a plugin library.
#include "framework/plugin/load_error.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace qflow {

namespace {

constexpr std::string_view kUndefined = "undefined symbol: ";

// The C++ name of an Itanium-mangled symbol; empty when it is not one (a C name).
std::string demangle(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                                   &std::free);
  return status == 0 && text ? std::string(text.get()) : std::string();
}

}  // namespace

std::string explain_load_error(std::string_view loader_text, std::string_view path) {
  std::string message(loader_text.empty() ? std::string_view("the dynamic loader refused it") : loader_text);
  const std::string file_prefix = std::string(path) + ": ";
  if (!path.empty() && message.rfind(file_prefix, 0) == 0) message.erase(0, file_prefix.size());

  const std::size_t at = message.find(kUndefined);
  if (at == std::string::npos) return message;
  const std::size_t start = at + kUndefined.size();
  // glibc appends " (version)" or ", version X" to versioned symbols; the name ends at either.
  const std::size_t end = std::min(message.find_first_of(" ,", start), message.size());
  const std::string symbol = message.substr(start, end - start);
  const std::string readable = demangle(symbol);
  const std::string shown = readable.empty() ? symbol : readable + " (" + symbol + ")";
  return message.substr(0, start) + shown + message.substr(end) +
         ": link the library that defines it, or build with qflow_add_plugin, which refuses undefined symbols";
}

}  // namespace qflow
