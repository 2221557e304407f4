// `qflow convert`: import and re-export, the lossless round trip (optionally with inferred shapes).
#include <filesystem>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/onnx/onnx_version.h"
#include "framework/quant/opset_upgrade.h"

namespace qflow::cli {

namespace po = boost::program_options;

namespace {

Status raise_to(Model& model, int64_t target) {
  const int64_t current = default_opset(model);
  if (target < current)
    return invalid_input("--opset " + std::to_string(target) + " is below the model's opset " + std::to_string(current) +
                         "; qflow only raises opsets");
  return raise_opset(model, target);
}

}  // namespace

Status run_convert(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the ONNX model to read")
      ("output,o", po::value<std::string>()->required(), "where to write the ONNX model")
      ("infer-shapes", "record ONNX shape inference results as value_info")
      ("opset", po::value<int64_t>(), "raise the default-domain opset to N (at most 21)");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("convert", args, options, positional));
  if (cmd.help) {
    print_command_help("convert MODEL --output OUT.onnx [--infer-shapes] [--opset N]",
                       "Imports MODEL into qflow's IR and exports it again. Without --infer-shapes the\n"
                       "result computes exactly what the original does; it is written atomically.\n"
                       "--opset N raises the default-domain opset: libonnx's version converter up to\n"
                       "opset 13, then qflow's adapters (docs/quantization.md, Opsets).",
                       options);
    return Status::ok();
  }
  const std::string path = cmd.values["model"].as<std::string>();
  const std::string out = cmd.values["output"].as<std::string>();
  // Checked up front so the message names the folder, not the exporter's temporary file.
  const std::filesystem::path parent = std::filesystem::path(out).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent))
    return not_found("cannot write '" + out + "': folder '" + parent.string() + "' does not exist");
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  if (cmd.values.count("opset")) QFLOW_RETURN_IF_ERROR(raise_to(model, cmd.values["opset"].as<int64_t>()).with_context(path));
  if (cmd.values.count("infer-shapes"))
    QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path + ": shape inference failed"));
  QFLOW_RETURN_IF_ERROR(export_onnx_file(model, out));
  std::cout << "wrote " << out << " (" << model.graph->node_count() << " nodes)\n";
  return Status::ok();
}

}  // namespace qflow::cli
