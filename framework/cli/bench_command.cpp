// `qflow bench MODEL --data X.npy`: times one engine (the float interpreter for .onnx, or the
// target that runs a deployable file on the host) per sample, loading excluded.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "framework/cli/command.h"
#include "framework/cli/deployed_file.h"
#include "framework/cli/op_profile.h"
#include "framework/core/file_io.h"
#include "qflow/core/json_writer.h"
#include "framework/data/npy.h"
#include "framework/onnx/onnx_import.h"
#include "framework/interpreter/executor.h"
#include "framework/interpreter/kernel_isa.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kDescription =
    "Times MODEL on the samples of --data and prints one JSON object: the engine, the load\n"
    "time, the median, p10, p90, mean and min of the per-sample times in milliseconds, every\n"
    "per-sample time, and the process's peak RSS.\n\n"
    "MODEL.onnx runs with the float interpreter (--threads workers); a deployable file that an\n"
    "installed target runs on the host runs there (a simulator, or the device runtime built\n"
    "for the host as a device application runs it; single-input models only), the engine\n"
    "named by the file's role. Each --data file holds samples stacked along the\n"
    "first axis; each sample runs alone as a batch of 1, samples in turn, --warmup untimed runs\n"
    "first, then --runs timed ones. Loading the model and the data is not part of the times.\n\n"
    "--profile (float interpreter) also times every node of the timed runs: the JSON gains\n"
    "\"profile\", the milliseconds per sample of each operator (a chain the interpreter fused\n"
    "into its Conv/Gemm counts as one, named like \"Conv+BatchNormalization+HardSwish\"), and\n"
    "the same table is printed on stderr.";

// One sample run; returns a failure message or "".
using SampleRun = std::function<Status(const Tensor& sample)>;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Linear interpolation between closest ranks (numpy's default percentile).
double percentile(std::vector<double> sorted, double p) {
  if (sorted.empty()) return 0.0;
  std::sort(sorted.begin(), sorted.end());
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// Splits every file's array along its first axis into samples of batch 1.
Expected<std::vector<Tensor>> load_samples(const std::vector<std::string>& files) {
  std::vector<Tensor> samples;
  for (const std::string& file : files) {
    QFLOW_ASSIGN_OR_RETURN(Tensor all, read_npy_file(file));
    if (all.rank() == 0 || all.dim(0) == 0) return invalid_input(file + ": holds no samples");
    Shape shape = all.shape();
    shape[0] = 1;
    const std::size_t row_bytes = all.nbytes() / static_cast<std::size_t>(all.dim(0));
    for (int64_t r = 0; r < all.dim(0); ++r) {
      Tensor row(all.dtype(), shape);
      if (row_bytes) std::memcpy(row.raw_data(), all.raw_data() + static_cast<std::size_t>(r) * row_bytes, row_bytes);
      samples.push_back(std::move(row));
    }
  }
  return samples;
}

Status check_float_sample(const std::string& engine, const Tensor& sample, std::size_t expected) {
  if (sample.dtype() != DType::Float32 || static_cast<std::size_t>(sample.numel()) != expected)
    return invalid_input(engine + " input takes " + std::to_string(expected) + " float values per sample, --data gives " +
                         std::string(dtype_name(sample.dtype())) + " " + shape_to_string(sample.shape()));
  return Status::ok();
}

// The engines. The returned function owns what its runs need and runs one sample.
struct Engine {
  std::string name;
  SampleRun run;
  // Per-op times of the runs since start_profile, per run; null when the engine has none.
  std::function<void()> start_profile;
  std::function<std::vector<OpProfileRow>()> profile;
};

// Member order matters: the executor refers to the model and goes first.
struct FloatState {
  Model model;
  std::unique_ptr<Executor> executor;
  std::string input;
  std::optional<RunProfile> profile;
};

// A node's op; a Conv's with its kernel size and whether it is grouped, which decide its
// algorithm (1x1: a plain GEMM; grouped with one channel per group: depthwise, no GEMM).
std::string profile_label(const Node& node) {
  std::string label = node.op_type();
  if (label != "Conv") return label;
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  for (std::size_t d = 0; d < kernel.size(); ++d) {
    label += d ? 'x' : ' ';
    label += std::to_string(kernel[d]);
  }
  if (node.attr_int("group", 1) > 1) label += " grouped";
  return label;
}

// Rows by label: a node's, or for a Conv/Gemm that computed the nodes after it, the chain's.
std::vector<OpProfileRow> float_profile_rows(const Executor& executor, const RunProfile& profile) {
  const std::vector<Node*>& order = executor.order();
  std::vector<std::string> labels(order.size());
  for (std::size_t s = 0; s < order.size(); ++s) labels[s] = profile_label(*order[s]);
  for (std::size_t s = 0; s < order.size(); ++s)
    if (profile.fused_into[s] >= 0) labels[static_cast<std::size_t>(profile.fused_into[s])] += "+" + order[s]->op_type();
  std::map<std::string, OpProfileRow> by_label;
  const double runs = std::max(1, profile.runs);
  for (std::size_t s = 0; s < order.size(); ++s) {
    if (!profile.computed[s]) continue;
    OpProfileRow& row = by_label[labels[s]];
    row.op = labels[s];
    ++row.nodes;
    row.ms += profile.seconds[s] * 1000.0 / runs;
  }
  std::vector<OpProfileRow> rows;
  for (auto& [label, row] : by_label) rows.push_back(std::move(row));
  sort_op_profile(rows);
  return rows;
}

Expected<Engine> float_engine(const std::string& path, int threads) {
  auto state = std::make_shared<FloatState>();
  QFLOW_ASSIGN_OR_RETURN(state->model, import_onnx_file(path));
  const std::vector<Value*> inputs = state->model.graph->runtime_inputs();
  if (inputs.size() != 1)
    return unsupported(path + ": bench runs single-input models, this one has " + std::to_string(inputs.size()));
  state->input = inputs[0]->name();
  ExecutorOptions options;
  options.threads = threads;
  QFLOW_ASSIGN_OR_RETURN(state->executor, Executor::create(state->model, options));
  return Engine{"float",
                [state](const Tensor& sample) -> Status {
                  std::map<std::string, Tensor> feeds{{state->input, sample}};
                  auto results = state->executor->run(feeds, {}, state->profile ? &*state->profile : nullptr);
                  return results ? Status::ok() : results.status();
                },
                [state] { state->profile.emplace(); },
                [state] {
                  return state->profile ? float_profile_rows(*state->executor, *state->profile)
                                        : std::vector<OpProfileRow>{};
                }};
}

// A deployable file through its target's Target::load; the engine is named by the file's role.
Expected<Engine> deployed_engine(const std::string& path, DeployedFile file) {
  const std::vector<DeployedTensor> inputs = file.model->inputs();
  if (inputs.size() != 1)
    return unsupported(path + ": bench runs single-input models, this one has " + std::to_string(inputs.size()));
  std::size_t count = 1;
  for (int64_t d : inputs[0].shape) count *= static_cast<std::size_t>(d);
  std::shared_ptr<DeployedModel> model = std::move(file.model);
  const Shape shape = inputs[0].shape;
  return Engine{file.role,
                [model, count, shape](const Tensor& sample) -> Status {
                  QFLOW_RETURN_IF_ERROR(check_float_sample(model->description(), sample, count));
                  const std::vector<Tensor> feeds{sample.reshaped(shape)};
                  return model->run(feeds).status();
                },
                {},
                {}};
}

}  // namespace

Status run_bench(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(),
       "the model: .onnx (float) or a deployable file an installed target runs on the host")
      ("data,d", po::value<std::vector<std::string>>()->composing()->required(),
       "X.npy with samples along the first axis; repeat to add files")
      ("threads", po::value<int>()->default_value(1), "float interpreter worker threads (0: one per core)")
      ("runs", po::value<int>()->default_value(20), "timed sample runs")
      ("warmup", po::value<int>()->default_value(3), "untimed sample runs before the timed ones")
      ("profile", po::bool_switch(), "also time every node (float interpreter): a per-op table");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("bench", args, options, positional));
  if (cmd.help) {
    print_command_help("bench MODEL --data X.npy [--data ...] [--threads N] [--runs R] [--warmup W] [--profile]",
                       kDescription, options);
    return Status::ok();
  }
  int threads = cmd.values["threads"].as<int>();
  const int runs = cmd.values["runs"].as<int>();
  const int warmup = cmd.values["warmup"].as<int>();
  const bool profile = cmd.values["profile"].as<bool>();
  if (threads < 0) return invalid_input("bench: --threads must not be negative, got " + std::to_string(threads));
  if (runs < 1) return invalid_input("bench: --runs must be at least 1, got " + std::to_string(runs));
  if (warmup < 0) return invalid_input("bench: --warmup must not be negative, got " + std::to_string(warmup));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  const std::string path = cmd.values["model"].as<std::string>();
  QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> samples, load_samples(cmd.values["data"].as<std::vector<std::string>>()));

  const Clock::time_point load_start = Clock::now();
  QFLOW_ASSIGN_OR_RETURN(std::optional<DeployedFile> deployed, open_deployed_file(path));
  Expected<Engine> engine = deployed ? deployed_engine(path, std::move(*deployed)) : float_engine(path, threads);
  if (!engine) return engine.status();
  const double load_ms = elapsed_ms(load_start);
  if (profile && !engine->start_profile)
    return invalid_input("bench: --profile times the nodes of the float interpreter (.onnx models); " + path +
                         " runs on " + engine->name);

  for (int i = 0; i < warmup; ++i)
    QFLOW_RETURN_IF_ERROR(engine->run(samples[static_cast<std::size_t>(i) % samples.size()]).with_context(path));
  if (profile) engine->start_profile();
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    const Tensor& sample = samples[static_cast<std::size_t>(warmup + i) % samples.size()];
    const Clock::time_point start = Clock::now();
    QFLOW_RETURN_IF_ERROR(engine->run(sample).with_context(path));
    times.push_back(elapsed_ms(start));
  }

  double sum = 0.0;
  for (double t : times) sum += t;
  JsonWriter json(0);
  json.begin_object()
      .field("model", path)
      .field("engine", engine->name)
      .field("threads", engine->name == "float" ? threads : 1)
      .field("samples", samples.size())
      .field("warmup", warmup)
      .field("runs", runs)
      .field("load_ms", load_ms)
      .field("median_ms", percentile(times, 50))
      .field("p10_ms", percentile(times, 10))
      .field("p90_ms", percentile(times, 90))
      .field("mean_ms", sum / static_cast<double>(times.size()))
      .field("min_ms", *std::min_element(times.begin(), times.end()))
      .field("peak_rss_mib", peak_rss_mib())
      .field("isa", kernel_isa_summary());
  json.key("times_ms").begin_array(true);
  for (double t : times) json.value(t);
  json.end_array();
  if (profile) {
    const std::vector<OpProfileRow> rows = engine->profile();
    json.key("profile");
    write_op_profile(json, rows, sum / static_cast<double>(times.size()));
    print_op_profile(std::cerr, rows, sum / static_cast<double>(times.size()));
  }
  json.end_object();
  QFLOW_ASSIGN_OR_RETURN(std::string text, json.finish());
  std::cout << text << "\n";
  return Status::ok();
}

}  // namespace qflow::cli
