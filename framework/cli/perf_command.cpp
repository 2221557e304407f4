// `qflow perf`: a roofline estimate of a model on one BPU platform, per layer, per subgraph and in total.
#include <filesystem>
#include <iostream>
#include <system_error>

#include "framework/cli/command.h"
#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_import.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Estimates the cost of a float ONNX model on a BPU platform (bernoulli2, bayes, nash, or\n"
    "any NAME.toml in --platform-dir): per node in topological order, its placement and\n"
    "subgraph (as qflow check partitions the model), MACs, bytes of weights read and of\n"
    "activations read and written (float32 = 4 bytes without a quantization table), and\n"
    "for BPU nodes the roofline cycles max(MACs / macs-per-cycle, bytes / bytes-per-cycle)\n"
    "from the platform's [cost] figures; then totals per subgraph and for the model, with\n"
    "the BPU time in microseconds. CPU nodes get MACs and bytes but no cycles. Shapes come\n"
    "from ONNX shape inference; symbolic dimensions count as 1. The text goes to stdout\n"
    "(--json: the JSON instead) and both are written to OUT/model_perf.txt and\n"
    "OUT/model_perf.json. Uses the component backend:bpu-perf; see docs/bpu-checker.md.";

Expected<std::string> report(const ComponentRegistry& registry, Options options, const std::string& format,
                             const Model& model) {
  options.set("format", format);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, registry.make_backend("bpu-perf", options));
  return backend->compile(model, QuantTable{});
}

}  // namespace

Status run_perf(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the ONNX model to estimate")
      ("platform", po::value<std::string>()->required(), "BPU platform: bernoulli2, bayes, nash, ...")
      ("platform-dir", po::value<std::string>()->default_value(""),
       "folder of platform .toml files (default: the bpu backend's own)")
      ("run-on-cpu", po::value<std::vector<std::string>>()->composing(), "place node NODE on the CPU (repeatable)")
      ("run-on-bpu", po::value<std::vector<std::string>>()->composing(),
       "require node NODE on the BPU; an error if the platform cannot run it (repeatable)")
      ("out", po::value<std::string>()->default_value("."), "folder for model_perf.{txt,json}")
      ("json", "print the JSON report instead of the text");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("perf", args, options, positional));
  if (cmd.help) {
    print_command_help("perf MODEL --platform NAME [--platform-dir DIR] [--run-on-cpu NODE]...\n"
                       "                  [--run-on-bpu NODE]... [--out DIR] [--json]",
                       kDescription, options);
    return Status::ok();
  }
  const std::string path = cmd.values["model"].as<std::string>();
  const std::string out = cmd.values["out"].as<std::string>();
  auto strings = [&](const char* key) {
    return cmd.values.count(key) ? cmd.values[key].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  Options backend_options;
  backend_options.set("platform", cmd.values["platform"].as<std::string>());
  backend_options.set("platform-dir", cmd.values["platform-dir"].as<std::string>());
  backend_options.set("run-on-cpu", strings("run-on-cpu"));
  backend_options.set("run-on-bpu", strings("run-on-bpu"));

  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path + ": shape inference failed"));
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  QFLOW_ASSIGN_OR_RETURN(std::string text, report(*registry, backend_options, "text", model));
  QFLOW_ASSIGN_OR_RETURN(std::string json, report(*registry, backend_options, "json", model));

  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return io_error("cannot create output folder '" + out + "': " + ec.message());
  const std::filesystem::path folder(out);
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "model_perf.txt").string(), text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "model_perf.json").string(), json));
  std::cout << (cmd.values.count("json") ? json : text);
  return Status::ok();
}

}  // namespace qflow::cli
