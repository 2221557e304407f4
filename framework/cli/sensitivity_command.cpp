// `qflow sensitivity`: which node's quantization costs the model output the most.
#include <filesystem>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/cli/quantization_options.h"
#include "framework/core/file_io.h"
#include "framework/data/data_options.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/sensitivity.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "For every node that the QDQ model built from FLOAT.onnx and the calibration table\n"
    "quantizes, builds two models in which only that node is quantized (its weights alone,\n"
    "its output activations alone) and runs them and the\n"
    "float model on every sample of DATA (an .npy batch, a folder of .npy files or of images,\n"
    "as the load-data stage reads them with default options). Reports the mean over samples\n"
    "of the cosine between all float outputs and all outputs of each model, worst node first.\n"
    "--method local instead compares each node's own outputs with them quantized (one float\n"
    "run per sample for all nodes); auto, the default, does so when the two models per node\n"
    "would run more than 50000 GMAC.\n"
    "The table is read by the load calibrator. Quantization settings are the defaults, or\n"
    "--pipeline's [quantization] table and --set quantization.KEY=VALUE as `qflow run` applies\n"
    "them; table entries of another activation type than the settings ask are re-derived\n"
    "from their threshold. The text goes to stdout (--json: the JSON) and both to\n"
    "OUT/sensitivity.{txt,json} (docs/accuracy-debugging.md).";

}  // namespace

Status run_sensitivity(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the float model the table was calibrated on")
      ("qparams", po::value<std::string>()->required(), "the calibration table (calibration_table.json)")
      ("data", po::value<std::string>()->required(), "samples: .npy batch or folder")
      ("limit", po::value<int64_t>()->default_value(0), "only the first N samples; 0 = all")
      ("threads", po::value<int>()->default_value(1), "samples run at once")
      ("method", po::value<std::string>()->default_value("auto"),
       "output, local, or auto (output unless it would run more than 50000 GMAC)")
      ("top", po::value<int64_t>()->default_value(0), "show only the N most sensitive nodes; 0 = all")
      ("out", po::value<std::string>()->default_value("."), "folder for sensitivity.{txt,json}")
      ("json", "print the JSON instead of the text");
  add_quantization_options(options);
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("sensitivity", args, options, positional));
  if (cmd.help) {
    print_command_help("sensitivity FLOAT.onnx --qparams TABLE.json --data PATH [--limit N] [--threads N]\n"
                       "                         [--method auto|output|local] [--out DIR] [--json] [--top N]\n"
                       "                         [--pipeline P.toml]\n"
                       "                         [--set quantization.KEY=VALUE]...",
                       kDescription, options);
    return Status::ok();
  }
  QFLOW_ASSIGN_OR_RETURN(const QuantConfig config, quantization_settings(cmd.values));
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(cmd.values["model"].as<std::string>()));
  // The table as a pipeline would load it: the `load` calibrator parses and checks it.
  QFLOW_ASSIGN_OR_RETURN(QuantTable table, load_calibration_table(model, cmd.values["qparams"].as<std::string>()));
  QFLOW_RETURN_IF_ERROR(retype_activations(model, table, config));
  Options data_options;
  data_options.set("path", cmd.values["data"].as<std::string>());
  QFLOW_ASSIGN_OR_RETURN(DataSpec spec, data_spec_from_options(data_options));
  QFLOW_ASSIGN_OR_RETURN(Dataset dataset, open_dataset(spec));
  SensitivityOptions ranking;
  ranking.threads = cmd.values["threads"].as<int>();
  ranking.limit = cmd.values["limit"].as<int64_t>();
  ranking.method = cmd.values["method"].as<std::string>();
  ProgressBar bar("sensitivity", 0);  // on a terminal only
  ranking.bar = &bar;
  QFLOW_ASSIGN_OR_RETURN(SensitivityResult result, analyze_sensitivity(model, table, &config, dataset, ranking));
  bar.finish();
  const int64_t top = cmd.values["top"].as<int64_t>();
  const std::string text = sensitivity_text(result, top);
  QFLOW_ASSIGN_OR_RETURN(std::string json, sensitivity_json(result, top));
  const std::filesystem::path folder(cmd.values["out"].as<std::string>());
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return io_error("cannot create output folder '" + folder.string() + "': " + ec.message());
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "sensitivity.txt").string(), text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "sensitivity.json").string(), json));
  std::cout << (cmd.values.count("json") ? json : text);
  return Status::ok();
}

}  // namespace qflow::cli
