// `qflow infer`: binds .npy files to model inputs, runs them in batches, writes one .npy per output.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "framework/cli/command.h"
#include "framework/cli/deployed_file.h"
#include "framework/cli/input_batching.h"
#include "framework/cli/model_format.h"
#include "framework/core/file_io.h"
#include "framework/data/npy.h"
#include "framework/onnx/onnx_import.h"
#include "framework/interpreter/executor.h"
#include "qflow/npy_runs.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Runs MODEL with the reference interpreter and writes <output-name>.npy per model output\n"
    "into DIR. In file names, characters other than letters, digits, '_', '-' and '.' become\n"
    "'_', and a leading '.' becomes '_' (so 'logits/0' is written as 'logits_0.npy').\n\n"
    "--input FILE binds to the first model input that is not an initializer, a second\n"
    "unnamed --input to the next one, and so on; --input NAME=FILE binds by name.\n\n"
    "An array whose shape matches the input's declared shape (static dimensions equal,\n"
    "symbolic ones anything) is fed as is, whatever the other inputs hold. An array whose\n"
    "first dimension is a multiple k > 1 of a fixed first dimension B is a stack of samples,\n"
    "run B at a time (one by one for B = 1). With --batch-size B > 0, the rows of inputs with a\n"
    "symbolic first dimension are samples too, run B at a time (default 0: all in one run).\n"
    "Outputs of several runs are concatenated along their first axis. All inputs split into\n"
    "runs must hold the same number of samples. A model without inputs takes no --input.\n\n"
    "--carry OUTPUT=INPUT runs a recurrent model over a stream: each run's OUTPUT is fed to\n"
    "INPUT in the next run (a VAD's state across audio frames with --batch-size 1).\n\n"
    "NumPy has no bfloat16: a bfloat16 input takes a uint16 array of bit patterns or a float32\n"
    "array (rounded to nearest even); bfloat16 outputs are written as float32 (exact).\n\n"
    "A deployable file that an installed target runs on the host (a simulator, the device\n"
    "runtime built for the host; docs/targets.md) runs there instead.\n"
    "Its inputs take float32 arrays of their exact shape; an input of batch 1 also takes a\n"
    "stack of samples along the first axis, run one by one. --batch-size and --threads do not\n"
    "apply to it; --carry does.";

struct BoundInput {
  const Value* value = nullptr;
  std::string file;
  Tensor tensor;
};

// NumPy has no bfloat16: an input declared bfloat16 takes a uint16 array of the bit patterns
// (what onnx.numpy_helper gives) or a float32 array, rounded to the nearest bfloat16.
Tensor as_bfloat16_input(const Value& input, Tensor array) {
  if (!input.type || input.type->dtype != DType::BFloat16) return array;
  if (array.dtype() == DType::Float32) return array.cast(DType::BFloat16);
  if (array.dtype() != DType::UInt16) return array;
  Tensor bits(DType::BFloat16, array.shape());
  if (array.nbytes() > 0) std::memcpy(bits.raw_data(), array.raw_data(), array.nbytes());
  return bits;
}

Expected<std::vector<BoundInput>> bind_inputs(const Graph& graph, const std::vector<std::string>& specs) {
  const std::vector<Value*> runtime = graph.runtime_inputs();
  std::map<const Value*, std::string> files;
  std::size_t next_unnamed = 0;
  for (const std::string& spec : specs) {
    const std::size_t eq = spec.find('=');
    const Value* named = nullptr;
    if (eq != std::string::npos) {
      const std::string name = spec.substr(0, eq);
      for (const Value* v : runtime)
        if (v->name() == name) named = v;
      // A prefix that names no input is only an error if it cannot be a file name either.
      if (!named && !std::filesystem::exists(spec)) {
        std::string names;
        for (const Value* v : runtime) names += (names.empty() ? "" : ", ") + v->name();
        return invalid_input("--input " + spec + ": the model has no input named '" + name + "' (inputs: " + names + ")");
      }
    }
    const Value* target = named;
    std::string file = named ? spec.substr(eq + 1) : spec;
    if (!target) {
      if (next_unnamed >= runtime.size())
        return invalid_input("--input " + spec + ": the model has only " + std::to_string(runtime.size()) +
                             " input(s) to bind unnamed files to");
      target = runtime[next_unnamed++];
    }
    if (files.count(target)) return invalid_input("input '" + target->name() + "' is given more than once");
    files[target] = file;
  }
  std::vector<BoundInput> bound;
  for (const Value* v : runtime) {
    auto it = files.find(v);
    if (it == files.end())
      return invalid_input("input '" + v->name() + "' was not given (use --input " + v->name() + "=FILE.npy)");
    QFLOW_ASSIGN_OR_RETURN(Tensor tensor, read_npy_file(it->second));
    bound.push_back({v, it->second, as_bfloat16_input(*v, std::move(tensor))});
  }
  return bound;
}

Status write_outputs(const Graph& graph, const std::string& dir, const std::map<std::string, Tensor>& results) {
  std::map<std::string, std::string> file_of;  // file name -> output name
  for (const Value* v : graph.outputs) {
    const std::string file = safe_file_name(v->name()) + ".npy";
    auto [it, inserted] = file_of.emplace(file, v->name());
    if (!inserted)
      return invalid_input("outputs '" + it->second + "' and '" + v->name() + "' would both be written to " + file);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create output directory '" + dir + "': " + ec.message());
  for (const Value* v : graph.outputs) {
    const Tensor& result = results.at(v->name());
    // NumPy has no bfloat16; float32 holds every bfloat16 value exactly.
    const bool widened = result.dtype() == DType::BFloat16;
    const Tensor t = widened ? result.cast(DType::Float32) : result;
    const std::string path = (std::filesystem::path(dir) / (safe_file_name(v->name()) + ".npy")).string();
    QFLOW_RETURN_IF_ERROR(write_npy_file(path, t));
    std::cout << "wrote " << path << " (" << format_array_type(t) << (widened ? ", from bfloat16" : "") << ")\n";
  }
  return Status::ok();
}

// --carry OUTPUT=INPUT pairs, checked: OUTPUT is a graph output, INPUT a bound input fed
// whole to every run (its file holds the first run's value).
Expected<std::vector<std::pair<std::string, std::string>>> bind_carries(const Graph& graph,
                                                                        const std::vector<BoundInput>& inputs,
                                                                        const std::vector<InputBatching>& plans,
                                                                        const std::vector<std::string>& specs) {
  std::vector<std::pair<std::string, std::string>> carries;
  for (const std::string& spec : specs) {
    const std::size_t eq = spec.find('=');
    if (eq == std::string::npos) return invalid_input("--carry " + spec + ": expected OUTPUT=INPUT");
    const std::string output = spec.substr(0, eq), input = spec.substr(eq + 1);
    if (std::none_of(graph.outputs.begin(), graph.outputs.end(), [&](const Value* v) { return v->name() == output; }))
      return invalid_input("--carry " + spec + ": the model has no output named '" + output + "'");
    std::size_t i = 0;
    while (i < inputs.size() && inputs[i].value->name() != input) ++i;
    if (i == inputs.size()) return invalid_input("--carry " + spec + ": the model has no input named '" + input + "'");
    if (plans[i].batched)
      return invalid_input("--carry " + spec + ": input '" + input + "' must be given one value (its declared shape), " +
                           inputs[i].file + " holds a stack of " + std::to_string(plans[i].samples));
    carries.emplace_back(output, input);
  }
  return carries;
}

// `qflow infer FILE` of a deployable file an installed target runs on the host.
Status run_infer_deployed(DeployedModel& model, const std::string& path, const std::vector<std::string>& specs,
                          const std::vector<std::string>& carries, const std::string& dir) {
  std::vector<FixedModelIo> inputs, outputs;
  // A uint8 frame input takes uint8 arrays (docs/input-types.md); the file runs them as floats.
  for (const DeployedTensor& t : model.inputs()) inputs.push_back({t.name, t.shape, t.dtype});
  for (const DeployedTensor& t : model.outputs()) outputs.push_back({t.name, t.shape, DType::Float32});
  return run_fixed_model_on_npy(inputs, outputs, specs, carries, dir, path,
                                [&](const std::vector<const std::byte*>& feeds, std::vector<std::vector<float>>& results) {
                                  std::vector<Tensor> tensors;
                                  for (size_t i = 0; i < feeds.size(); ++i) {
                                    Tensor t(inputs[i].dtype, inputs[i].shape);
                                    std::memcpy(t.raw_data(), feeds[i], t.nbytes());
                                    tensors.push_back(t.dtype() == DType::Float32 ? std::move(t) : t.cast(DType::Float32));
                                  }
                                  QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> produced, model.run(tensors));
                                  results.clear();
                                  for (const Tensor& t : produced)
                                    results.emplace_back(t.data<float>(), t.data<float>() + t.numel());
                                  return Status::ok();
                                });
}

}  // namespace

Status run_infer(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(),
       "the ONNX model, or a deployable file an installed target runs on the host")
      ("input,i", po::value<std::vector<std::string>>()->composing(),
       "FILE.npy or NAME=FILE.npy; repeat for several inputs (none for a model without inputs)")
      ("output-dir,o", po::value<std::string>()->required(), "folder for the <output-name>.npy files")
      ("batch-size", po::value<int64_t>()->default_value(0),
       "samples per run for models with a symbolic first dimension (0: all at once)")
      ("carry", po::value<std::vector<std::string>>()->composing(),
       "OUTPUT=INPUT: each run's OUTPUT feeds INPUT of the next run (recurrent state); the first "
       "run takes INPUT's file; repeat for several")
      ("threads", po::value<int>()->default_value(0), "worker threads (0: one per core)");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("infer", args, options, positional));
  if (cmd.help) {
    print_command_help("infer MODEL --input [NAME=]X.npy [--input ...] --output-dir DIR [--batch-size B] "
                       "[--carry OUTPUT=INPUT ...] [--threads N]",
                       kDescription, options);
    return Status::ok();
  }
  const int64_t batch_size = cmd.values["batch-size"].as<int64_t>();
  int threads = cmd.values["threads"].as<int>();
  if (batch_size < 0) return invalid_input("infer: --batch-size must not be negative, got " + std::to_string(batch_size));
  if (threads < 0) return invalid_input("infer: --threads must not be negative, got " + std::to_string(threads));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  const std::string path = cmd.values["model"].as<std::string>();
  const std::vector<std::string> input_specs =
      cmd.values.count("input") ? cmd.values["input"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const std::vector<std::string> carry_specs =
      cmd.values.count("carry") ? cmd.values["carry"].as<std::vector<std::string>>() : std::vector<std::string>{};
  QFLOW_ASSIGN_OR_RETURN(std::optional<DeployedFile> deployed, open_deployed_file(path));
  if (deployed)
    return run_infer_deployed(*deployed->model, path, input_specs, carry_specs, cmd.values["output-dir"].as<std::string>());
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  const Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<BoundInput> inputs, bind_inputs(graph, input_specs));
  std::vector<InputBatching> plans;
  std::vector<std::string> files;
  for (const BoundInput& in : inputs) {
    QFLOW_ASSIGN_OR_RETURN(InputBatching plan, plan_input_batching(*in.value, in.tensor, in.file, batch_size > 0));
    plans.push_back(plan);
    files.push_back(in.file);
  }
  QFLOW_ASSIGN_OR_RETURN(const RunBatches run, plan_run_batches(plans, files, batch_size));

  QFLOW_ASSIGN_OR_RETURN(const auto carries, bind_carries(graph, inputs, plans, carry_specs));

  ExecutorOptions executor_options;
  executor_options.threads = threads;
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model, executor_options));

  std::map<std::string, std::vector<Tensor>> parts;
  const int64_t chunk = run.chunk > 0 ? run.chunk : std::max<int64_t>(run.samples, 1);
  const int64_t runs = run.chunk > 0 ? (run.samples + chunk - 1) / chunk : 1;
  for (int64_t r = 0; r < runs; ++r) {
    std::map<std::string, Tensor> feeds;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i].tensor;
      feeds[inputs[i].value->name()] =
          plans[i].batched && runs > 1 ? slice_rows(t, r * chunk, std::min(chunk, run.samples - r * chunk)) : t;
    }
    for (const auto& [output, input] : carries)
      if (r > 0) feeds[input] = parts[output].back();
    auto results = executor->run(feeds);
    if (!results) {
      if (runs == 1) return results.status().with_context(path);
      return results.status().with_context(path + ", run " + std::to_string(r + 1) + " of " + std::to_string(runs));
    }
    for (auto& [name, tensor] : *results) parts[name].push_back(std::move(tensor));
  }
  std::map<std::string, Tensor> outputs;
  for (const auto& [name, tensors] : parts) {
    QFLOW_ASSIGN_OR_RETURN(Tensor joined, concat_rows(name, tensors));
    outputs[name] = std::move(joined);
  }
  return write_outputs(graph, cmd.values["output-dir"].as<std::string>(), outputs);
}

}  // namespace qflow::cli
