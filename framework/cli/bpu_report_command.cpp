// The command line shared by `qflow check` and `qflow perf` (bpu_report_command.h).
#include <filesystem>
#include <iostream>
#include <system_error>

#include "framework/cli/bpu_report_command.h"
#include "framework/cli/command.h"
#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_import.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

Expected<TargetReport> report(const ComponentRegistry& registry, const BpuReportCommand& command, const Options& options,
                               const Model& model) {
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, registry.make_target(std::string(command.target), options));
  return command.section == BpuReportCommand::Section::check ? target->check(model) : target->estimate(model, QuantTable{});
}

}  // namespace

Status run_bpu_report_command(const BpuReportCommand& command, const std::vector<std::string>& args) {
  const std::string name(command.name);
  const std::string stem(command.file_stem);
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), std::string(command.model_help).c_str())
      ("platform", po::value<std::string>()->required(), "BPU platform: bernoulli2, bayes, nash, ...")
      ("platform-dir", po::value<std::string>()->default_value(""),
       "folders of platform .toml files (colon-separated), searched before $QFLOW_PLATFORM_PATH and the built-in ones")
      ("run-on-cpu", po::value<std::vector<std::string>>()->composing(), "place node NODE on the CPU (repeatable)")
      ("run-on-bpu", po::value<std::vector<std::string>>()->composing(),
       "require node NODE on the BPU; an error if the platform cannot run it (repeatable)")
      ("out", po::value<std::string>()->default_value("."), ("folder for " + stem + ".{txt,json}").c_str())
      ("json", "print the JSON report instead of the text");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line(name, args, options, positional));
  if (cmd.help) {
    print_command_help(name + " MODEL --platform NAME [--platform-dir DIR] [--run-on-cpu NODE]...\n" +
                           std::string(name.size() + 14, ' ') + "[--run-on-bpu NODE]... [--out DIR] [--json]",
                       command.description, options);
    return Status::ok();
  }
  const std::string path = cmd.values["model"].as<std::string>();
  const std::string out = cmd.values["out"].as<std::string>();
  auto strings = [&](const char* key) {
    return cmd.values.count(key) ? cmd.values[key].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  Options target_options;
  target_options.set("platform", cmd.values["platform"].as<std::string>());
  target_options.set("platform-dir", cmd.values["platform-dir"].as<std::string>());
  target_options.set("run-on-cpu", strings("run-on-cpu"));
  target_options.set("run-on-bpu", strings("run-on-bpu"));

  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path + ": shape inference failed"));
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  QFLOW_ASSIGN_OR_RETURN(TargetReport section, report(*registry, command, target_options, model));
  const std::string& text = section.text;
  const std::string& json = section.json;

  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return io_error("cannot create output folder '" + out + "': " + ec.message());
  const std::filesystem::path folder(out);
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / (stem + ".txt")).string(), text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / (stem + ".json")).string(), json));
  std::cout << (cmd.values.count("json") ? json : text);
  return Status::ok();
}

}  // namespace qflow::cli
