// `qflow compare`: a QDQ model against its float model, per quantized activation.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/cli/quantization_options.h"
#include "framework/core/file_io.h"
#include "framework/data/data_options.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/layer_compare.h"
#include "framework/quant/qdq_builder.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Runs every sample of DATA (an .npy batch, a folder of .npy files or of images, as the\n"
    "load-data stage reads them with default options) through the float model and the QDQ\n"
    "model built from it, and compares every quantized activation (a QuantizeLinear ->\n"
    "DequantizeLinear pair) with the float tensor of the same name: cosine, mean squared\n"
    "error, largest absolute error and SQNR (dB), over all samples. 'accumulated' compares the\n"
    "two models run from the sample; 'isolated' runs only the producing node quantized, fed\n"
    "the float model's inputs through the QDQ model's input Q/DQ pairs. Rows are sorted worst\n"
    "first (lowest accumulated cosine). Instead of QDQ.onnx, --qparams TABLE.json builds the PTQ\n"
    "model from FLOAT.onnx and the table (as the quantize stage does, without bias correction)\n"
    "under the default quantization settings, or --pipeline's [quantization] table and --set\n"
    "quantization.KEY=VALUE; table entries of another activation type than the settings ask\n"
    "are re-derived from their threshold. The text goes to stdout (--json: the JSON) and both\n"
    "to OUT/compare_per_layer.{txt,json} (docs/accuracy-debugging.md).";

}  // namespace

Status run_compare(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("float", po::value<std::string>()->required(), "the float model the QDQ model was built from")
      ("qdq", po::value<std::string>(), "the QDQ model (<name>_ptq_model.onnx or calibrated)")
      ("qparams", po::value<std::string>(), "build the PTQ model from this calibration table instead of reading QDQ.onnx")
      ("data", po::value<std::string>()->required(), "samples: .npy batch or folder")
      ("limit", po::value<int64_t>()->default_value(0), "only the first N samples; 0 = all")
      ("threads", po::value<int>()->default_value(1), "samples run at once")
      ("out", po::value<std::string>()->default_value("."), "folder for compare_per_layer.{txt,json}")
      ("json", "print the JSON instead of the text");
  add_quantization_options(options);
  po::positional_options_description positional;
  positional.add("float", 1).add("qdq", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("compare", args, options, positional));
  if (cmd.help) {
    print_command_help("compare FLOAT.onnx QDQ.onnx --data PATH [--limit N] [--threads N] [--out DIR] [--json]\n"
                       "       qflow compare FLOAT.onnx --qparams TABLE.json [--pipeline P.toml]\n"
                       "                     [--set quantization.KEY=VALUE]... --data PATH [...]",
                       kDescription, options);
    return Status::ok();
  }
  const bool from_table = cmd.values.count("qparams") > 0;
  if (from_table == (cmd.values.count("qdq") > 0))
    return invalid_input("compare: give either QDQ.onnx or --qparams TABLE.json");
  if (!from_table && has_quantization_options(cmd.values))
    return invalid_input("compare: --pipeline and --set apply to --qparams only (QDQ.onnx already fixes its quantization)");
  QFLOW_ASSIGN_OR_RETURN(const QuantConfig config, quantization_settings(cmd.values));
  QFLOW_ASSIGN_OR_RETURN(Model float_model, import_onnx_file(cmd.values["float"].as<std::string>()));
  Model qdq_model;
  if (from_table) {
    QFLOW_ASSIGN_OR_RETURN(QuantTable table, load_calibration_table(float_model, cmd.values["qparams"].as<std::string>()));
    QFLOW_RETURN_IF_ERROR(retype_activations(float_model, table, config));
    QFLOW_ASSIGN_OR_RETURN(qdq_model, import_onnx_file(cmd.values["float"].as<std::string>()));
    QFLOW_RETURN_IF_ERROR(build_qdq_model(qdq_model, table, &config, QdqOptions{}));
  } else {
    QFLOW_ASSIGN_OR_RETURN(qdq_model, import_onnx_file(cmd.values["qdq"].as<std::string>()));
  }
  Options data_options;
  data_options.set("path", cmd.values["data"].as<std::string>());
  QFLOW_ASSIGN_OR_RETURN(DataSpec spec, data_spec_from_options(data_options));
  QFLOW_ASSIGN_OR_RETURN(Dataset dataset, open_dataset(spec));
  const int64_t limit = cmd.values["limit"].as<int64_t>();
  ProgressBar progress("compare", limit > 0 ? std::min(limit, dataset.count) : dataset.count);  // on a terminal only
  QFLOW_ASSIGN_OR_RETURN(LayerComparison result,
                         compare_layers(float_model, qdq_model, dataset, cmd.values["threads"].as<int>(), limit, &progress));
  progress.finish();
  const std::string text = layer_comparison_text(result);
  QFLOW_ASSIGN_OR_RETURN(std::string json, layer_comparison_json(result));
  const std::filesystem::path folder(cmd.values["out"].as<std::string>());
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return io_error("cannot create output folder '" + folder.string() + "': " + ec.message());
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "compare_per_layer.txt").string(), text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "compare_per_layer.json").string(), json));
  std::cout << (cmd.values.count("json") ? json : text);
  return Status::ok();
}

}  // namespace qflow::cli
