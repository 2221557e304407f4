// `qflow plugins`: lists every loaded plugin library and the components it provides, as text or JSON.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/cli/plugin_options.h"
#include "framework/plugin/option_checks.h"
#include "qflow/core/json_writer.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Lists the plugin libraries qflow loaded (path, name, version, SHA-256 of the file) and\n"
    "every component they provide: kind, name, summary and options with type, default and\n"
    "help. Libraries come from the built-in folder next to libqflow_core (lib/qflow/plugins),\n"
    "then from QFLOW_PLUGIN_PATH (absolute folders or .so files separated by ':'), then from\n"
    "each --plugin FILE; --no-default-plugins skips the first two. Sorted by path, then kind\n"
    "and name.";

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  // Keeps the value a float when the text is read back (TOML and JSON readers alike).
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string quoted(const std::string& text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

// Defaults are printed as TOML literals, so they can be pasted into a pipeline file.
std::string format_default(const OptionValue& value) {
  switch (option_value_type(value)) {
    case OptionType::Bool: return std::get<bool>(value) ? "true" : "false";
    case OptionType::Int: return std::to_string(std::get<int64_t>(value));
    case OptionType::Float: return format_float(std::get<double>(value));
    case OptionType::String: return quoted(std::get<std::string>(value));
    case OptionType::StringList: {
      std::string out = "[";
      for (const std::string& item : std::get<std::vector<std::string>>(value))
        out += (out.size() > 1 ? ", " : "") + quoted(item);
      return out + "]";
    }
  }
  return "";
}

void write_default(JsonWriter& json, const OptionValue& value) {
  switch (option_value_type(value)) {
    case OptionType::Bool: json.value(std::get<bool>(value)); return;
    case OptionType::Int: json.value(std::get<int64_t>(value)); return;
    case OptionType::Float: json.value(std::get<double>(value)); return;
    case OptionType::String: json.value(std::get<std::string>(value)); return;
    case OptionType::StringList:
      json.begin_array(true);
      for (const std::string& item : std::get<std::vector<std::string>>(value)) json.value(item);
      json.end_array();
      return;
  }
}

std::vector<PluginLibrary> sorted_libraries(const ComponentRegistry& registry) {
  std::vector<PluginLibrary> libraries = registry.libraries();
  std::sort(libraries.begin(), libraries.end(),
            [](const PluginLibrary& a, const PluginLibrary& b) { return a.path < b.path; });
  for (PluginLibrary& library : libraries)
    std::sort(library.components.begin(), library.components.end(), [](const ComponentInfo& a, const ComponentInfo& b) {
      return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
    });
  return libraries;
}

void print_text(const std::vector<PluginLibrary>& libraries) {
  if (libraries.empty()) {
    std::cout << "no plugins loaded\n";
    return;
  }
  bool first = true;
  for (const PluginLibrary& library : libraries) {
    std::cout << (first ? "" : "\n") << library.name << " " << library.version << "\n"
              << "  path:   " << library.path << "\n"
              << "  sha256: " << library.sha256 << "\n";
    first = false;
    for (const ComponentInfo& c : library.components) {
      std::cout << "  " << component_kind_name(c.kind) << " " << c.name << ": " << c.summary << "\n";
      if (c.needs_samples) std::cout << "    reads calibration samples: its stage needs a dataset input\n";
      for (const OptionSpec& o : c.options) {
        const std::string limits = option_limits_text(o.limits);
        std::cout << "    " << o.name << " (" << option_type_name(o.type) << ", default " << format_default(o.default_value)
                  << (limits.empty() ? "" : ", " + limits) << ")" << (o.help.empty() ? "" : ": " + o.help) << "\n";
      }
    }
    for (const PassPipelineInfo& p : library.pass_pipelines)
      std::cout << "  pass-pipeline " << p.name << ": " << p.summary << "\n    passes: " << p.passes << "\n";
  }
}

Status print_json(const std::vector<PluginLibrary>& libraries) {
  JsonWriter json;
  json.begin_object().key("libraries").begin_array();
  for (const PluginLibrary& library : libraries) {
    json.begin_object()
        .field("path", library.path)
        .field("name", library.name)
        .field("version", library.version)
        .field("sha256", library.sha256)
        .key("components")
        .begin_array();
    for (const ComponentInfo& c : library.components) {
      json.begin_object()
          .field("kind", component_kind_name(c.kind))
          .field("name", c.name)
          .field("summary", c.summary)
          .key("options")
          .begin_array();
      for (const OptionSpec& o : c.options) {
        json.begin_object().field("name", o.name).field("type", option_type_name(o.type)).key("default");
        write_default(json, o.default_value);
        if (const std::string limits = option_limits_text(o.limits); !limits.empty()) json.field("limits", limits);
        json.field("help", o.help).end_object();
      }
      json.end_array().end_object();
    }
    json.end_array();
    if (!library.pass_pipelines.empty()) {
      json.key("pass_pipelines").begin_array();
      for (const PassPipelineInfo& p : library.pass_pipelines)
        json.begin_object().field("name", p.name).field("summary", p.summary).field("passes", p.passes).end_object();
      json.end_array();
    }
    json.end_object();
  }
  json.end_array().end_object();
  QFLOW_ASSIGN_OR_RETURN(std::string text, json.finish());
  std::cout << text;
  return Status::ok();
}

}  // namespace

Status run_plugins(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("json", "print JSON instead of text")("help,h", "show this help");
  po::positional_options_description positional;
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine parsed, parse_command_line("plugins", args, options, positional));
  if (parsed.help) {
    print_command_help("plugins [--json] [--plugin FILE]... [--no-default-plugins]", kDescription, options);
    return Status::ok();
  }
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  const std::vector<PluginLibrary> libraries = sorted_libraries(*registry);
  if (parsed.values.count("json")) return print_json(libraries);
  print_text(libraries);
  return Status::ok();
}

}  // namespace qflow::cli
