// `qflow infer`: binds .npy files to model inputs, runs them in batches, writes one .npy per output.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "framework/cli/command.h"
#include "framework/cli/lowered_io.h"
#include "framework/cli/model_format.h"
#include "framework/core/file_io.h"
#include "framework/core/npy.h"
#include "framework/onnx/onnx_import.h"
#include "framework/runtime/executor.h"
#include "qflow/lowered/bc.h"
#include "runtime/lowered/executor.h"

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
    "symbolic ones anything) is fed as is. Otherwise its first axis indexes samples: a model\n"
    "with a fixed first dimension B runs them B at a time (one by one for B = 1). A model with\n"
    "a symbolic first dimension runs --batch-size samples at a time (default 0: all in one\n"
    "run). Outputs of several runs are concatenated along their first axis. All batched inputs\n"
    "must hold the same number of samples.\n\n"
    "A lowered model (MODEL.bc, written by a BPU backend) runs with the fixed-point executor.\n"
    "Its inputs take float32 arrays of their exact shape; an input of batch 1 also takes a\n"
    "stack of samples along the first axis, run one by one. --batch-size and --threads do not\n"
    "apply to it.";

struct BoundInput {
  const Value* value = nullptr;
  std::string file;
  Tensor tensor;
};

// How an input's array is split into runs.
struct InputPlan {
  bool batched = false;   // false: fed whole to every run
  int64_t samples = 0;
  int64_t fixed_chunk = 0;  // > 0 when the model fixes the first dimension
};

std::string safe_file_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.';
    out += keep ? c : '_';
  }
  if (out.empty()) return "_";
  if (out[0] == '.') out[0] = '_';
  return out;
}

std::string array_text(const Tensor& t) { return std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape()); }

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
    bound.push_back({v, it->second, std::move(tensor)});
  }
  return bound;
}

Expected<InputPlan> plan_input(const BoundInput& in) {
  const std::optional<ValueType>& type = in.value->type;
  const Tensor& t = in.tensor;
  const std::string declared = format_value_type(type);
  if (type && type->dtype != DType::Undefined && type->dtype != t.dtype())
    return invalid_input(in.file + ": input '" + in.value->name() + "' expects " + declared + ", the file holds " +
                         array_text(t));
  if (!type || !type->shape || type->shape->empty()) return InputPlan{};
  const std::vector<Dim>& dims = *type->shape;
  bool trailing_match = dims.size() == static_cast<std::size_t>(t.rank());
  for (std::size_t i = 1; trailing_match && i < dims.size(); ++i)
    if (dims[i].value && *dims[i].value != t.shape()[i]) trailing_match = false;
  if (trailing_match) {
    const Dim& first = dims[0];
    if (!first.value) return InputPlan{true, t.dim(0), 0};
    const int64_t b = *first.value;
    if (t.dim(0) == b) return InputPlan{true, t.dim(0), b};
    if (b > 0 && t.dim(0) % b == 0) return InputPlan{true, t.dim(0), b};
  }
  const bool stackable = dims[0].value && *dims[0].value > 0;
  return invalid_input(in.file + ": input '" + in.value->name() + "' expects " + declared +
                       (stackable ? " (or such arrays stacked along the first axis)" : "") + ", the file holds " +
                       array_text(t));
}

// Rows [begin, begin + count) of the first axis, copied.
Tensor slice_rows(const Tensor& t, int64_t begin, int64_t count) {
  if (begin == 0 && count == t.dim(0)) return t;
  Shape shape = t.shape();
  shape[0] = count;
  Tensor out(t.dtype(), shape);
  const std::size_t row_bytes = t.dim(0) ? t.nbytes() / static_cast<std::size_t>(t.dim(0)) : 0;
  if (out.nbytes() > 0)
    std::memcpy(out.raw_data(), t.raw_data() + static_cast<std::size_t>(begin) * row_bytes, out.nbytes());
  return out;
}

Expected<Tensor> concat_rows(const std::string& name, const std::vector<Tensor>& parts) {
  if (parts.size() == 1) return parts[0];
  const Tensor& first = parts[0];
  int64_t rows = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    const bool same_tail = p.rank() == first.rank() && p.rank() > 0 &&
                           std::equal(p.shape().begin() + 1, p.shape().end(), first.shape().begin() + 1);
    if (p.dtype() != first.dtype() || !same_tail)
      return invalid_input("output '" + name + "' cannot be concatenated along its first axis: run 1 gave " +
                           array_text(first) + ", run " + std::to_string(i + 1) + " gave " + array_text(p));
    rows += p.dim(0);
  }
  Shape shape = first.shape();
  shape[0] = rows;
  QFLOW_ASSIGN_OR_RETURN(Tensor out, Tensor::make(first.dtype(), shape));
  std::size_t offset = 0;
  for (const Tensor& p : parts) {
    if (p.nbytes() > 0) std::memcpy(out.raw_data() + offset, p.raw_data(), p.nbytes());
    offset += p.nbytes();
  }
  return out;
}

struct RunPlan {
  int64_t samples = 0;
  int64_t chunk = 0;  // 0: a single run with everything
};

Expected<RunPlan> plan_runs(const std::vector<BoundInput>& inputs, const std::vector<InputPlan>& plans,
                            int64_t batch_size) {
  RunPlan run;
  const BoundInput* reference = nullptr;
  bool any_fixed = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!plans[i].batched) continue;
    if (reference && plans[i].samples != run.samples)
      return invalid_input("inputs hold different numbers of samples: " + reference->file + " has " +
                           std::to_string(run.samples) + ", " + inputs[i].file + " has " +
                           std::to_string(plans[i].samples));
    if (!reference) {
      reference = &inputs[i];
      run.samples = plans[i].samples;
    }
    if (plans[i].fixed_chunk > 0) {
      if (any_fixed && run.chunk != plans[i].fixed_chunk)
        return unsupported("inputs fix different batch sizes (" + std::to_string(run.chunk) + " and " +
                           std::to_string(plans[i].fixed_chunk) + ")");
      any_fixed = true;
      run.chunk = plans[i].fixed_chunk;
    }
  }
  if (reference && run.samples == 0) return invalid_input(reference->file + " holds no samples");
  if (!any_fixed) run.chunk = batch_size > 0 ? batch_size : 0;
  if (run.chunk >= run.samples) run.chunk = 0;
  return run;
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
    const Tensor& t = results.at(v->name());
    const std::string path = (std::filesystem::path(dir) / (safe_file_name(v->name()) + ".npy")).string();
    QFLOW_RETURN_IF_ERROR(write_npy_file(path, t));
    std::cout << "wrote " << path << " (" << array_text(t) << ")\n";
  }
  return Status::ok();
}

// `qflow infer MODEL.bc`: the lowered model with the executor the .hbm runtime also uses.
Status run_infer_bc(const std::string& path, const std::vector<std::string>& specs, const std::string& dir) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  Expected<lowered::Model> model =
      decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!model) return model.status().with_context(path);
  hbm::Expected<lowered::Executor> executor = lowered::Executor::create(*model);
  if (!executor) return invalid_input(path + ": " + executor.message());
  std::vector<LoweredIo> inputs, outputs;
  for (int32_t i : model->inputs) {
    const lowered::Tensor& t = model->tensors[static_cast<size_t>(i)];
    inputs.push_back({t.name, t.shape, DType::Float32});
  }
  for (int32_t o : model->outputs) {
    const lowered::Tensor& t = model->tensors[static_cast<size_t>(o)];
    outputs.push_back({t.name, t.shape, DType::Float32});
  }
  const lowered::Executor& exec = *executor;
  return run_lowered_on_npy(inputs, outputs, specs, dir, path,
                            [&](const std::vector<const std::byte*>& feeds, std::vector<std::vector<float>>& results) {
                              std::vector<std::span<const float>> spans;
                              for (size_t i = 0; i < feeds.size(); ++i) {
                                size_t n = 1;
                                for (int64_t d : inputs[i].shape) n *= static_cast<size_t>(d);
                                spans.emplace_back(reinterpret_cast<const float*>(feeds[i]), n);
                              }
                              if (hbm::Status s = exec.run(spans, results); !s) return invalid_input(s.message());
                              return Status::ok();
                            });
}

}  // namespace

Status run_infer(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the ONNX model (or lowered .bc model) to run")
      ("input,i", po::value<std::vector<std::string>>()->composing()->required(),
       "FILE.npy or NAME=FILE.npy; repeat for several inputs")
      ("output-dir,o", po::value<std::string>()->required(), "folder for the <output-name>.npy files")
      ("batch-size", po::value<int64_t>()->default_value(0),
       "samples per run for models with a symbolic first dimension (0: all at once)")
      ("threads", po::value<int>()->default_value(0), "worker threads (0: one per core)");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("infer", args, options, positional));
  if (cmd.help) {
    print_command_help("infer MODEL --input [NAME=]X.npy [--input ...] --output-dir DIR [--batch-size B] [--threads N]",
                       kDescription, options);
    return Status::ok();
  }
  const int64_t batch_size = cmd.values["batch-size"].as<int64_t>();
  int threads = cmd.values["threads"].as<int>();
  if (batch_size < 0) return invalid_input("infer: --batch-size must not be negative, got " + std::to_string(batch_size));
  if (threads < 0) return invalid_input("infer: --threads must not be negative, got " + std::to_string(threads));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  const std::string path = cmd.values["model"].as<std::string>();
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".bc") == 0) {
    return run_infer_bc(path, cmd.values["input"].as<std::vector<std::string>>(),
                        cmd.values["output-dir"].as<std::string>());
  }
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  const Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<BoundInput> inputs,
                         bind_inputs(graph, cmd.values["input"].as<std::vector<std::string>>()));
  std::vector<InputPlan> plans;
  for (const BoundInput& in : inputs) {
    QFLOW_ASSIGN_OR_RETURN(InputPlan plan, plan_input(in));
    plans.push_back(plan);
  }
  QFLOW_ASSIGN_OR_RETURN(RunPlan run, plan_runs(inputs, plans, batch_size));

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
