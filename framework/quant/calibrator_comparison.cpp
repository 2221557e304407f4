// Calibrator comparison: one QDQ model per calibration table, all run on the same samples.
#include "framework/quant/calibrator_comparison.h"

#include <algorithm>
#include <cstdio>

#include "qflow/core/json_writer.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/qdq_builder.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

// The outputs of `model` for every sample, in sample order (graph output order within one).
Expected<std::vector<SampleOutputs>> run_outputs(const Model& model, const std::vector<Feeds>& samples, ThreadPool& pool,
                                                 const Dataset& dataset) {
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));
  std::vector<SampleOutputs> outputs(samples.size());
  std::vector<Status> status(samples.size(), Status::ok());
  pool.parallel_for(static_cast<int64_t>(samples.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto k = static_cast<std::size_t>(i);
      auto values = executor->run(samples[k]);
      if (!values) {
        status[k] = values.status();
        continue;
      }
      for (const Value* out : model.graph->outputs) {
        auto it = values->find(out->name());
        if (it == values->end()) {
          status[k] = internal_error("output '" + out->name() + "' was not computed");
          break;
        }
        outputs[k].push_back(it->second);
      }
    }
  });
  for (std::size_t k = 0; k < samples.size(); ++k)
    if (!status[k].is_ok()) return status[k].with_context(sample_location(dataset, static_cast<int64_t>(k)));
  return outputs;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace

Expected<CalibratorComparison> compare_calibrators(const Model& float_model, const std::vector<CalibratorBranch>& branches,
                                                   const QuantConfig* config, bool weights, const Dataset& dataset,
                                                   int threads, int64_t limit, const Metric* metric,
                                                   const std::string& metric_name) {
  Expected<InputBinding> binding = bind_inputs(*float_model.graph, dataset);
  if (!binding) return binding.status().with_context("compare-calibrators");
  QFLOW_ASSIGN_OR_RETURN(const std::vector<Feeds> samples, read_feeds(dataset, *binding, limit));
  if (samples.empty()) return invalid_input("compare-calibrators: the dataset has no samples");

  CalibratorComparison result;
  result.samples = static_cast<int64_t>(samples.size());
  result.weights = weights;
  result.metric = metric ? metric_name : std::string();
  ThreadPool pool(std::max(1, threads));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<SampleOutputs> reference,
                         run_outputs(float_model, samples, pool, dataset));
  std::vector<std::vector<float>> reference_flat;
  for (const SampleOutputs& outputs : reference) reference_flat.push_back(flatten_sample_outputs(outputs));
  auto score = [&](const std::vector<SampleOutputs>& outputs) -> Expected<double> {
    MetricInput input;
    input.first_sample = 0;
    input.outputs = &outputs;
    input.reference = &reference;
    Expected<double> value = metric->evaluate(input);
    if (!value) return value.status().with_context("metric '" + metric_name + "'");
    return value;
  };
  if (metric) {
    QFLOW_ASSIGN_OR_RETURN(result.float_metric, score(reference));
  }

  for (const CalibratorBranch& branch : branches) {
    const std::string head = "compare-calibrators: branch '" + branch.label + "' (" + branch.method + ")";
    if (!branch.table) return internal_error(head + ": no calibration table");
    Model qdq = float_model.copy();
    QdqOptions options;
    options.weights = weights;
    QFLOW_RETURN_IF_ERROR(build_qdq_model(qdq, *branch.table, config, options).with_context(head));
    Expected<std::vector<SampleOutputs>> outputs = run_outputs(qdq, samples, pool, dataset);
    if (!outputs) return outputs.status().with_context(head);
    CalibratorScore row{branch.label, branch.stage, branch.method, branch.seconds, 0.0, std::nullopt};
    double sum = 0.0;
    for (std::size_t k = 0; k < outputs->size(); ++k)
      sum += cosine_similarity(reference_flat[k], flatten_sample_outputs((*outputs)[k]));
    row.cosine = sum / static_cast<double>(outputs->size());
    if (metric) {
      Expected<double> value = score(*outputs);
      if (!value) return value.status().with_context(head);
      row.metric = *value;
    }
    result.rows.push_back(std::move(row));
  }
  return result;
}

std::string calibrator_comparison_text(const CalibratorComparison& result) {
  std::string text = "samples: " + std::to_string(result.samples) + "; " +
                     (result.weights ? "PTQ models (weights and activations quantized)"
                                     : "calibrated models (activations quantized)") +
                     " against the float model\n";
  const bool has_metric = !result.metric.empty();
  if (has_metric) text += "metric " + result.metric + " of the float model: " + fixed(*result.float_metric, 4) + "\n";
  std::size_t lw = 6, mw = 6;
  for (const CalibratorScore& row : result.rows) {
    lw = std::max(lw, row.label.size());
    mw = std::max(mw, row.method.size());
  }
  const std::size_t metric_width = std::max<std::size_t>(8, result.metric.size());
  text += pad("branch", lw) + "  " + pad("method", mw) + "  output_cos  ";
  if (has_metric) text += pad(result.metric, metric_width) + "  ";
  text += "calibrate_s\n";
  for (const CalibratorScore& row : result.rows) {
    text += pad(row.label, lw) + "  " + pad(row.method, mw) + "  " + pad(fixed(row.cosine, 6), 10) + "  ";
    if (has_metric) text += pad(fixed(*row.metric, 4), metric_width) + "  ";
    text += fixed(row.seconds, 3) + "\n";
  }
  return text;
}

Expected<std::string> calibrator_comparison_json(const CalibratorComparison& result) {
  JsonWriter json;
  json.begin_object();
  json.key("branches").begin_array();
  for (const CalibratorScore& row : result.rows) {
    json.begin_object();
    json.field("calibrate_seconds", row.seconds);
    json.field("label", row.label);
    json.field("method", row.method);
    json.key("metric");
    if (row.metric) json.value(*row.metric);
    else json.null();
    json.field("output_cosine", row.cosine);
    json.field("stage", row.stage);
    json.end_object();
  }
  json.end_array();
  json.key("metric");
  if (result.metric.empty()) {
    json.null();
  } else {
    json.begin_object();
    json.field("float", *result.float_metric);
    json.field("name", result.metric);
    json.end_object();
  }
  json.field("model", result.weights ? "ptq" : "calibrated");
  json.field("samples", result.samples);
  json.end_object();
  return json.finish();
}

}  // namespace qflow
