// Stage execution: host stages (import-onnx, load-data) and plugin stages over in-memory artifacts.
#include "framework/pipeline/stage_execution.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "framework/core/json_writer.h"
#include "framework/core/npy.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/graph_text.h"
#include "framework/plugin/component_registry.h"
#include "framework/runtime/executor.h"

namespace qflow {

namespace {

Options options_of(const PipelineStage& stage) {
  Options options;
  for (const auto& [name, option] : stage.options) options.set(name, option.value);
  return options;
}

std::string string_option(const PipelineStage& stage, const std::string& name) {
  return std::get<std::string>(stage.options.at(name).value);
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

void write_shape(JsonWriter& json, const Shape& shape) {
  json.begin_array(true);
  for (int64_t d : shape) json.value(d);
  json.end_array();
}

template <typename T>
void write_numbers(JsonWriter& json, const std::vector<T>& numbers) {
  json.begin_array(true);
  for (const T& x : numbers) json.value(x);
  json.end_array();
}

Expected<Model> model_input(const PipelineStage& stage, const Artifact& artifact) {
  return import_onnx_bytes(artifact.bytes, "input 'model' of stage '" + stage.id + "'");
}

Expected<StageResult> model_result(const Model& model) {
  StageResult result;
  result.artifact.type = ArtifactType::Model;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, export_onnx_bytes(model));
  return result;
}

Expected<StageResult> run_import(const PipelineStage& stage) {
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(string_option(stage, "path")));
  return model_result(model);
}

Expected<StageResult> run_load_data(const PipelineStage& stage) {
  const std::string path = string_option(stage, "path");
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, ec))
      if (entry.path().extension() == ".npy") files.push_back(entry.path().string());
    if (ec) return io_error("cannot list '" + path + "': " + ec.message());
    // Name order, so the sample order (and everything order-sensitive) is reproducible.
    std::sort(files.begin(), files.end());
    if (files.empty()) return invalid_input(path + ": the folder holds no .npy files");
  } else {
    files.push_back(path);
  }
  auto dataset = std::make_shared<Dataset>();
  for (const std::string& file : files) {
    QFLOW_ASSIGN_OR_RETURN(Tensor tensor, read_npy_file(file));
    if (tensor.rank() < 1) return invalid_input(file + ": a scalar holds no samples (the first axis indexes samples)");
    const Shape sample(tensor.shape().begin() + 1, tensor.shape().end());
    if (dataset->files.empty()) {
      dataset->dtype = tensor.dtype();
      dataset->sample_shape = sample;
    } else if (tensor.dtype() != dataset->dtype || sample != dataset->sample_shape) {
      return invalid_input(file + ": samples are " + std::string(dtype_name(tensor.dtype())) + " " +
                           shape_to_string(sample) + ", " + dataset->files[0].path + " holds " +
                           std::string(dtype_name(dataset->dtype)) + " " + shape_to_string(dataset->sample_shape));
    }
    dataset->files.push_back({file, tensor.dim(0)});
    dataset->count += tensor.dim(0);
  }
  if (dataset->count == 0) return invalid_input(path + ": holds no samples");
  JsonWriter json;
  json.begin_object();
  json.field("count", dataset->count);
  json.field("dtype", dtype_name(dataset->dtype));
  json.key("files").begin_array();
  for (const DatasetFile& file : dataset->files) {
    json.begin_object(true).field("path", file.path).field("samples", file.samples).end_object();
  }
  json.end_array();
  json.key("sample_shape");
  write_shape(json, dataset->sample_shape);
  json.end_object();
  StageResult result;
  result.artifact.type = ArtifactType::Dataset;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, json.finish());
  result.artifact.dataset = dataset;
  return result;
}

Tensor sample_row(const Tensor& batch, int64_t row, const Shape& feed_shape) {
  Tensor out(batch.dtype(), feed_shape);
  if (out.nbytes() > 0) std::memcpy(out.raw_data(), batch.raw_data() + static_cast<std::size_t>(row) * out.nbytes(), out.nbytes());
  return out;
}

std::string statistics_json(const std::string& component, int64_t samples,
                            const std::map<std::string, std::shared_ptr<Observer>>& observers,
                            const std::map<std::string, TensorStatistics>& statistics) {
  JsonWriter json;
  json.begin_object();
  json.field("component", component);
  json.field("samples", samples);
  json.key("tensors").begin_object();
  for (const auto& [name, s] : statistics) {
    json.key(name).begin_object();
    json.field("axis", s.axis);
    json.key("channel_max");
    write_numbers(json, s.channel_max);
    json.key("channel_min");
    write_numbers(json, s.channel_min);
    json.field("count", s.count);
    json.key("histogram");
    write_numbers(json, s.histogram);
    json.field("histogram_range", s.histogram_range);
    json.field("inf_count", s.inf_count);
    json.field("max", s.max);
    json.field("min", s.min);
    json.field("nan_count", s.nan_count);
    json.field("state", hex(observers.at(name)->serialize()));
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  return text ? *text : std::string();
}

// One observer per float32 value (graph input or node output), fed every sample once per
// pass the observer asks for. Samples run one at a time in dataset order, so the result
// does not depend on any batch size or thread count.
Expected<StageResult> run_observer(const PipelineStage& stage, const Artifact& model_artifact, const Dataset& dataset,
                                   const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, model_artifact));
  const std::vector<Value*> inputs = model.graph->runtime_inputs();
  if (inputs.size() != 1)
    return unsupported("stage '" + stage.id + "': the model has " + std::to_string(inputs.size()) +
                       " inputs; load-data feeds exactly one");
  const Value& input = *inputs[0];
  // A model input one rank above the samples takes them with a batch axis of 1.
  Shape feed_shape = dataset.sample_shape;
  const bool has_rank = input.type && input.type->shape;
  if (!has_rank || input.type->shape->size() != feed_shape.size()) feed_shape.insert(feed_shape.begin(), 1);
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));

  const Options options = options_of(stage);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> probe, registry.make_observer(stage.component, options));
  const int passes = std::max(1, probe->passes());
  std::map<std::string, std::shared_ptr<Observer>> observers;
  auto observe = [&](const std::string& name, const Tensor& tensor, int pass) -> Status {
    if (tensor.dtype() != DType::Float32) return Status::ok();
    auto it = observers.find(name);
    if (it == observers.end()) {
      if (pass > 0) return Status::ok();
      QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> created, registry.make_observer(stage.component, options));
      QFLOW_RETURN_IF_ERROR(created->begin_pass(0));
      it = observers.emplace(name, std::move(created)).first;
    }
    return it->second->observe(tensor).with_context("observing '" + name + "'");
  };
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0)
      for (auto& [name, observer] : observers) QFLOW_RETURN_IF_ERROR(observer->begin_pass(pass));
    for (const DatasetFile& file : dataset.files) {
      QFLOW_ASSIGN_OR_RETURN(Tensor batch, read_npy_file(file.path));
      for (int64_t row = 0; row < file.samples; ++row) {
        const Tensor sample = sample_row(batch, row, feed_shape);
        QFLOW_RETURN_IF_ERROR(observe(input.name(), sample, pass));
        auto outputs = executor->run({{input.name(), sample}}, [&](const Value& value, const Tensor& tensor) {
          return observe(value.name(), tensor, pass);
        });
        if (!outputs) return outputs.status().with_context(file.path + ", sample " + std::to_string(row));
      }
    }
  }
  auto statistics = std::make_shared<std::map<std::string, TensorStatistics>>();
  for (const auto& [name, observer] : observers) (*statistics)[name] = observer->statistics();
  StageResult result;
  result.artifact.type = ArtifactType::Statistics;
  result.artifact.bytes = statistics_json(stage.component, dataset.count, observers, *statistics);
  result.artifact.statistics = statistics;
  return result;
}

std::string qparams_json(const QuantTable& table) {
  JsonWriter json;
  json.begin_object();
  json.key("tensors").begin_object();
  for (const auto& [name, q] : table) {
    json.key(name).begin_object();
    json.field("axis", q.axis);
    json.field("dtype", dtype_name(q.dtype));
    json.field("method", q.method);
    json.key("scale");
    write_numbers(json, q.scale);
    json.field("threshold", q.threshold);
    json.key("zero_point");
    write_numbers(json, q.zero_point);
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  return text ? *text : std::string();
}

Expected<StageResult> run_calibrator(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                     const ComponentRegistry& registry) {
  std::optional<Model> model;
  if (auto it = inputs.find("model"); it != inputs.end()) {
    QFLOW_ASSIGN_OR_RETURN(Model imported, model_input(stage, *it->second));
    model = std::move(imported);
  }
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Calibrator> calibrator, registry.make_calibrator(stage.component, options_of(stage)));
  CalibrationRequest request;
  request.statistics = inputs.at("statistics")->statistics.get();
  request.model = model ? &*model : nullptr;
  QFLOW_ASSIGN_OR_RETURN(QuantTable table, calibrator->calibrate(request));
  StageResult result;
  result.artifact.type = ArtifactType::QParams;
  result.artifact.bytes = qparams_json(table);
  result.artifact.qparams = std::make_shared<const QuantTable>(std::move(table));
  return result;
}

// Both checks run on the model as the pass left it, before export: the exporter would
// otherwise be the first to trip over a dangling value, with a less pointed message.
Status verify_pass_result(const Model& model) {
  QFLOW_RETURN_IF_ERROR(model.graph->validate().with_context("graph check"));
  return check_model(model).with_context("onnx checker");
}

Expected<StageResult> run_pass(const PipelineStage& stage, const Artifact& model_artifact, const ComponentRegistry& registry,
                               const StageChecks& checks) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, model_artifact));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Pass> pass, registry.make_pass(stage.component, options_of(stage)));
  const auto nodes_before = static_cast<int64_t>(model.graph->node_count());
  QFLOW_ASSIGN_OR_RETURN(PassResult effect, pass->run(model));
  if (checks.verify) QFLOW_RETURN_IF_ERROR(verify_pass_result(model).with_context("--verify-each"));
  std::string text = checks.print_graph ? graph_text(*model.graph) : std::string();
  QFLOW_ASSIGN_OR_RETURN(StageResult result, model_result(model));
  result.counters = effect.counters;
  result.nodes_before = nodes_before;
  result.nodes_after = static_cast<int64_t>(model.graph->node_count());
  result.pass_seconds = effect.seconds;
  result.graph_text = std::move(text);
  return result;
}

Expected<StageResult> run_backend(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                  const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, registry.make_backend(stage.component, options_of(stage)));
  static const QuantTable kNoParams;
  auto it = inputs.find("qparams");
  const QuantTable& params = it != inputs.end() ? *it->second->qparams : kNoParams;
  StageResult result;
  result.artifact.type = ArtifactType::Binary;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, backend->compile(model, params));
  return result;
}

}  // namespace

Expected<StageResult> execute_stage(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                    const ComponentRegistry& registry, const StageChecks& checks) {
  switch (stage.kind) {
    case StageKind::ImportOnnx: return run_import(stage);
    case StageKind::LoadData: return run_load_data(stage);
    case StageKind::Observer:
      return run_observer(stage, *inputs.at("model"), *inputs.at("dataset")->dataset, registry);
    case StageKind::Calibrator: return run_calibrator(stage, inputs, registry);
    case StageKind::Pass: return run_pass(stage, *inputs.at("model"), registry, checks);
    case StageKind::Backend: return run_backend(stage, inputs, registry);
  }
  return internal_error("unknown stage kind");
}

}  // namespace qflow
