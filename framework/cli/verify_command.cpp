// `qflow verify`: the PTQ model, the .bc simulator and the .hbm runtime on the same samples.
#include <filesystem>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/core/file_io.h"
#include "framework/data/data_options.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/lowered_verify.h"
#include "qflow/lowered/bc.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Runs every sample of DATA (an .npy batch, a folder of .npy files or of images, as the\n"
    "load-data stage reads them with default options) through the PTQ model (the float\n"
    "simulation of quantization, with the reference interpreter), the .bc simulator and the\n"
    ".hbm runtime (the runtime C API), and reports per output: mean and minimum cosine and\n"
    "the largest absolute error of the .bc and the .hbm against the PTQ model, and the rate\n"
    "of elements where the .hbm gives exactly the .bc value. The text goes to stdout (--json:\n"
    "the JSON) and both to OUT/verify_result.{txt,json}. Fails when the .hbm and the .bc\n"
    "differ anywhere.";

}  // namespace

Status run_verify(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the PTQ model (<name>_ptq_model.onnx)")
      ("bc", po::value<std::string>()->required(), "the lowered model (<name>_quantized_model.bc)")
      ("hbm", po::value<std::string>()->required(), "the compiled model (<name>.hbm)")
      ("data", po::value<std::string>()->required(), "samples: .npy batch or folder")
      ("limit", po::value<int64_t>()->default_value(0), "only the first N samples; 0 = all")
      ("threads", po::value<int>()->default_value(1), "samples run at once")
      ("out", po::value<std::string>()->default_value("."), "folder for verify_result.{txt,json}")
      ("json", "print the JSON instead of the text");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("verify", args, options, positional));
  if (cmd.help) {
    print_command_help("verify MODEL --bc FILE --hbm FILE --data PATH [--limit N] [--threads N] [--out DIR] [--json]",
                       kDescription, options);
    return Status::ok();
  }
  const std::string model_path = cmd.values["model"].as<std::string>();
  const std::string bc_path = cmd.values["bc"].as<std::string>();
  const std::string hbm_path = cmd.values["hbm"].as<std::string>();
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(model_path));
  QFLOW_ASSIGN_OR_RETURN(std::string bc_bytes, read_file(bc_path));
  Expected<lowered::Model> bc =
      decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bc_bytes.data()), bc_bytes.size()));
  if (!bc) return bc.status().with_context(bc_path);
  QFLOW_ASSIGN_OR_RETURN(std::string hbm_bytes, read_file(hbm_path));
  Options data_options;
  data_options.set("path", cmd.values["data"].as<std::string>());
  QFLOW_ASSIGN_OR_RETURN(DataSpec spec, data_spec_from_options(data_options));
  QFLOW_ASSIGN_OR_RETURN(Dataset dataset, open_dataset(spec));
  QFLOW_ASSIGN_OR_RETURN(
      LoweredVerification result,
      verify_lowered(model, *bc,
                     std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(hbm_bytes.data()), hbm_bytes.size()),
                     dataset, cmd.values["threads"].as<int>(), cmd.values["limit"].as<int64_t>()));
  const std::string text = verification_text(result);
  QFLOW_ASSIGN_OR_RETURN(std::string json, verification_json(result));
  const std::filesystem::path folder(cmd.values["out"].as<std::string>());
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return io_error("cannot create output folder '" + folder.string() + "': " + ec.message());
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "verify_result.txt").string(), text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "verify_result.json").string(), json));
  std::cout << (cmd.values.count("json") ? json : text);
  if (!result.bit_identical()) return invalid_input("verify: the .hbm runtime differs from the .bc simulator");
  return Status::ok();
}

}  // namespace qflow::cli
