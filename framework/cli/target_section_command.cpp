// The command line shared by `qflow check` and `qflow perf` (target_section_command.h).
#include "framework/cli/target_section_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>

#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/component_options.h"
#include "framework/pipeline/pipeline_text.h"

namespace qflow::cli {

namespace {

// The command line: the model, the command's own flags, and every other --KEY VALUE (or
// --KEY=VALUE) as a target option, in order.
struct SectionArgs {
  std::string model, target, out = ".";
  bool json = false, help = false;
  std::vector<std::pair<std::string, std::string>> options;
};

Expected<SectionArgs> parse_args(std::string_view command, const std::vector<std::string>& args) {
  SectionArgs parsed;
  const std::string prefix = std::string(command) + ": ";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      continue;
    }
    if (arg == "--json") {
      parsed.json = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!parsed.model.empty()) return invalid_input(prefix + "one model only, got '" + parsed.model + "' and '" + arg + "'");
      parsed.model = arg;
      continue;
    }
    const std::size_t eq = arg.find('=');
    const std::string key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) return invalid_input(prefix + "--" + key + " needs a value");
      value = args[++i];
    }
    if (key.empty()) return invalid_input(prefix + "'" + arg + "' names no option");
    if (key == "model") parsed.model = value;
    else if (key == "target") parsed.target = value;
    else if (key == "out") parsed.out = value;
    else parsed.options.emplace_back(key, value);
  }
  return parsed;
}

// The given options as `info` declares them: repeated keys only for list options.
Expected<Options> target_options(const ComponentInfo& info, const std::vector<std::pair<std::string, std::string>>& given) {
  std::vector<std::string> scalars;
  std::map<std::string, std::vector<std::string>> lists;
  for (const auto& [key, value] : given) {
    const auto spec = std::find_if(info.options.begin(), info.options.end(), [&](const OptionSpec& s) { return s.name == key; });
    if (spec != info.options.end() && spec->type == OptionType::StringList) lists[key].push_back(value);
    else scalars.push_back(key + "=" + value);
  }
  QFLOW_ASSIGN_OR_RETURN(Options options, parse_component_options(info, scalars, "target '" + info.name + "'"));
  for (auto& [key, values] : lists) options.set(key, std::move(values));
  return options;
}

// The target these options are for: --target, or the one installed target that takes them.
Expected<std::shared_ptr<Target>> section_target(std::string_view command, const ComponentRegistry& registry,
                                                 const SectionArgs& args) {
  std::vector<std::shared_ptr<Target>> found;
  std::vector<std::string> names, refusals;
  for (const ComponentInfo* info : registry.components(ComponentKind::Target)) {
    if (!args.target.empty() && info->name != args.target) continue;
    Expected<Options> options = target_options(*info, args.options);
    Expected<std::shared_ptr<Target>> made = options ? registry.make_target(info->name, *options)
                                                     : Expected<std::shared_ptr<Target>>(options.status());
    if (!made) {
      refusals.push_back(made.status().message());
      continue;
    }
    found.push_back(*made);
    names.push_back(info->name);
  }
  const std::string prefix = std::string(command) + ": ";
  if (found.size() == 1) return found[0];
  if (!args.target.empty() && refusals.size() == 1) return invalid_input(prefix + refusals[0]);
  if (!args.target.empty()) return not_found(prefix + "no target '" + args.target + "' installed (see qflow plugins)");
  if (found.empty())
    return invalid_input(prefix + "no installed target takes these options" +
                         (refusals.empty() ? std::string() : ": " + join(refusals, "; ")));
  return invalid_input(prefix + "targets " + join(names, ", ") + (names.size() == 2 ? " both" : " all") +
                       " take these options; choose one with --target");
}

void print_help(const TargetSectionCommand& command, const ComponentRegistry* registry) {
  std::cout << "usage: qflow " << command.name << " MODEL [--target NAME] [--OPTION VALUE]... [--out DIR] [--json]\n\n"
            << command.description << "\n\noptions:\n"
            << "  MODEL                 " << command.model_help << "\n"
            << "  --target NAME         the target (\"\": the one installed target that takes the options given)\n"
            << "  --out DIR (=.)        folder for " << command.file_stem << ".{txt,json}\n"
            << "  --json                print the JSON section instead of the text\n"
            << "  -h [ --help ]         show this help\n";
  if (!registry) return;
  for (const ComponentInfo* info : registry->components(ComponentKind::Target)) {
    std::cout << "\noptions of target '" << info->name << "':\n";
    for (const OptionSpec& spec : info->options)
      std::cout << "  --" << spec.name << (spec.type == OptionType::StringList ? " VALUE (repeatable)" : " VALUE")
                << "\n      " << spec.help << "\n";
  }
}

}  // namespace

Status run_target_section_command(const TargetSectionCommand& command, const std::vector<std::string>& args) {
  QFLOW_ASSIGN_OR_RETURN(SectionArgs parsed, parse_args(command.name, args));
  if (parsed.help) {
    Expected<ComponentRegistry*> registry = plugin_registry();
    print_help(command, registry ? *registry : nullptr);
    return Status::ok();
  }
  if (parsed.model.empty()) return invalid_input(std::string(command.name) + ": no model given");
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, section_target(command.name, *registry, parsed));
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(parsed.model));
  QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(parsed.model + ": shape inference failed"));
  QFLOW_ASSIGN_OR_RETURN(TargetReport section, command.section == TargetSectionCommand::Section::check
                                                   ? target->check(model)
                                                   : target->estimate(model, QuantTable{}));
  std::error_code ec;
  std::filesystem::create_directories(parsed.out, ec);
  if (ec) return io_error("cannot create output folder '" + parsed.out + "': " + ec.message());
  const std::filesystem::path folder(parsed.out);
  const std::string stem(command.file_stem);
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / (stem + ".txt")).string(), section.text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / (stem + ".json")).string(), section.json));
  std::cout << (parsed.json ? section.json : section.text);
  return Status::ok();
}

}  // namespace qflow::cli
