// verify: one pass over the samples, each run by the PTQ model and by every deployable file.
#include "framework/quant/deployed_verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "qflow/core/json_writer.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/distributed/share_units.h"
#include "framework/quant/output_cosine.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

using Flat = std::vector<float>;

constexpr int kVerifyTag = 7501;

// The results of one sample: [0] the PTQ model, then each file; each output flattened.
using SampleOutputs = std::vector<std::vector<Flat>>;

double max_abs_difference(const Flat& a, const Flat& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return worst;
}

Flat flatten(const Tensor& t) {
  if (t.dtype() == DType::Float32) return {t.data<float>(), t.data<float>() + t.numel()};
  Flat out;
  for (double v : t.to_doubles()) out.push_back(static_cast<float>(v));
  return out;
}

Tensor as_float(const Tensor& t) { return t.dtype() == DType::Float32 ? t : t.cast(DType::Float32); }

// Bitwise: NaN == NaN and -0 != +0 here, as a device comparison would see them.
int64_t bitwise_equal(const Flat& a, const Flat& b) {
  int64_t equal = 0;
  for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
    uint32_t x = 0, y = 0;
    std::memcpy(&x, &a[k], 4);
    std::memcpy(&y, &b[k], 4);
    equal += x == y ? 1 : 0;
  }
  return equal;
}

// The files loaded for one thread.
struct Loaded {
  std::vector<std::unique_ptr<DeployedModel>> models;
};

}  // namespace

bool DeployedVerification::bit_identical() const {
  return std::all_of(outputs.begin(), outputs.end(), [](const DeployedOutputCheck& o) {
    return std::all_of(o.files.begin(), o.files.end(), [](const FileCheck& f) { return f.differing == 0; });
  });
}

Expected<DeployedVerification> verify_deployed(const Model& ptq_model, const std::vector<RunnableFile>& files,
                                               const Dataset& dataset, int threads, int64_t limit,
                                               ProgressBar* progress, const World* world) {
  if (files.empty()) return invalid_input("verify: the target runs none of the deployable files on the host");
  Expected<InputBinding> binding = bind_inputs(*ptq_model.graph, dataset);
  if (!binding) return binding.status().with_context("verify");
  const auto& outputs = ptq_model.graph->outputs;
  const size_t output_count = outputs.size();
  threads = std::max(1, threads);

  DeployedVerification result;
  ThreadPool pool(threads);
  // Every thread's copies of the files (decoding and preparing a program takes as long as a
  // few samples) and the PTQ model's executor are made at once, one per thread.
  std::vector<Loaded> loaded(static_cast<size_t>(threads));
  std::vector<Status> load_status(static_cast<size_t>(threads) * files.size(), Status::ok());
  Expected<std::unique_ptr<Executor>> ptq = internal_error("the PTQ model's executor was not made");
  pool.parallel_for(threads + 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (t == threads) {
        ptq = Executor::create(ptq_model);
        continue;
      }
      for (size_t f = 0; f < files.size(); ++f) {
        Expected<std::unique_ptr<DeployedModel>> model = files[f].load();
        if (!model) {
          load_status[f * static_cast<size_t>(threads) + static_cast<size_t>(t)] =
              model.status().with_context("verify: deployable '" + files[f].role + "'");
          break;
        }
        loaded[static_cast<size_t>(t)].models.push_back(std::move(model).value());
      }
    }
  });
  for (size_t index = 0; index < files.size(); ++index) {
    const RunnableFile& file = files[index];
    // Failures and mismatches in file order, as loading one file after the other meets them.
    for (int t = 0; t < threads; ++t)
      if (const Status& status = load_status[index * static_cast<size_t>(threads) + static_cast<size_t>(t)]; !status.is_ok())
        return status;
    const DeployedModel& first = *loaded[0].models[index];
    for (const DeployedTensor& input : first.inputs())
      if (std::none_of(binding->begin(), binding->end(), [&](const InputFeed& f) { return f.input == input.name; }))
        return invalid_input("verify: the " + first.description() + " reads input '" + input.name +
                             "', which the PTQ model does not have");
    if (first.outputs().size() != output_count)
      return invalid_input("verify: the PTQ model has " + std::to_string(output_count) + " outputs, the " +
                           first.description() + " has " + std::to_string(first.outputs().size()));
    result.roles.push_back(file.role);
    result.descriptions.push_back(first.description());
  }
  if (!ptq) return ptq.status();
  for (size_t o = 0; o < output_count; ++o) {
    DeployedOutputCheck check;
    check.name = outputs[o]->name();
    check.files.resize(files.size());
    result.outputs.push_back(check);
  }
  const int64_t count = limit > 0 ? std::min(limit, dataset.count) : dataset.count;
  if (count == 0) return invalid_input("verify: the dataset has no samples");
  // Per sample, per output: its elements, then per file the cosine, the largest absolute
  // difference and the elements not bit for bit the first file's. A distributed run computes
  // its slice of the samples and shares the rows; every rank sums them in sample order.
  const size_t per_output = 1 + 3 * files.size(), width = output_count * per_output;
  std::vector<double> rows(static_cast<size_t>(count) * width, 0.0);
  SliceSweep sweep(world, count);

  auto run_one = [&](const Feeds& sample, Loaded& slot) -> Expected<SampleOutputs> {
    SampleOutputs out;
    // A file that converts its inputs (a uint8 frame made from the sample) names what the
    // PTQ model should see instead: the float tensor of that frame.
    Feeds reference_sample = sample;
    if (!slot.models.empty()) {
      const DeployedModel& first = *slot.models.front();
      std::vector<Tensor> inputs;
      for (const DeployedTensor& input : first.inputs()) inputs.push_back(as_float(sample.at(input.name)));
      QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> converted, first.reference_inputs(inputs));
      const std::vector<DeployedTensor> names = first.inputs();
      for (size_t i = 0; i < names.size() && i < converted.size(); ++i) reference_sample[names[i].name] = converted[i];
    }
    QFLOW_ASSIGN_OR_RETURN(auto ptq_out, (*ptq)->run(reference_sample));
    std::vector<Flat> reference;
    for (const Value* value : outputs) reference.push_back(flatten(ptq_out.at(value->name())));
    out.push_back(std::move(reference));
    for (const std::unique_ptr<DeployedModel>& model : slot.models) {
      std::vector<Tensor> inputs;
      for (const DeployedTensor& input : model->inputs()) inputs.push_back(as_float(sample.at(input.name)));
      QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> produced, model->run(inputs));
      std::vector<Flat> flat;
      for (const Tensor& t : produced) flat.push_back(flatten(t));
      out.push_back(std::move(flat));
    }
    return out;
  };

  // The row of sample `index` from its outputs, or the failure.
  auto measure = [&](int64_t index, const SampleOutputs& s) -> Status {
    double* row = rows.data() + static_cast<size_t>(index) * width;
    for (size_t o = 0; o < output_count; ++o, row += per_output) {
      const Flat& ptq_values = s[0][o];
      row[0] = static_cast<double>(ptq_values.size());
      for (size_t f = 0; f < files.size(); ++f) {
        const std::vector<Flat>& produced = s[f + 1];
        if (o >= produced.size() || produced[o].size() != ptq_values.size())
          return invalid_input("verify: output '" + result.outputs[o].name + "' has " +
                               std::to_string(ptq_values.size()) + " elements in the PTQ model, " +
                               std::to_string(o < produced.size() ? produced[o].size() : 0) + " in the " +
                               result.descriptions[f]);
        double* cell = row + 1 + 3 * f;
        cell[0] = cosine_similarity(ptq_values, produced[o]);
        cell[1] = max_abs_difference(ptq_values, produced[o]);
        cell[2] = f > 0 ? static_cast<double>(static_cast<int64_t>(produced[o].size()) - bitwise_equal(s[1][o], produced[o])) : 0.0;
      }
    }
    return Status::ok();
  };

  std::vector<std::pair<int64_t, Feeds>> batch;
  auto flush = [&]() -> Status {
    std::vector<Expected<SampleOutputs>> done(batch.size(), internal_error("sample not run"));
    pool.parallel_for(static_cast<int64_t>(batch.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        done[static_cast<size_t>(i)] = run_one(batch[static_cast<size_t>(i)].second, loaded[static_cast<size_t>(i)]);
    });
    for (size_t i = 0; i < batch.size() && sweep.status().is_ok(); ++i) {
      const int64_t index = batch[i].first;
      Status s = done[i] ? measure(index, *done[i])
                         : done[i].status().with_context("verify: " + sample_location(dataset, index));
      if (s.is_ok()) sweep.measured(index);
      else sweep.failed(index, std::move(s));
    }
    if (progress) progress->advance(static_cast<int64_t>(batch.size()));
    batch.clear();
    return sweep.status();
  };
  Status swept = for_each_feed_in(dataset, *binding, sweep.slice().begin, sweep.slice().end,
                                  [&](int64_t index, const Feeds& sample) -> Status {
                                    batch.emplace_back(index, sample);
                                    return batch.size() >= static_cast<size_t>(threads) ? flush() : Status::ok();
                                  });
  if (swept.is_ok()) swept = flush();
  QFLOW_RETURN_IF_ERROR(sweep.finish(swept, kVerifyTag, width, rows));

  std::vector<std::vector<double>> cosine_sum(output_count, std::vector<double>(files.size(), 0.0));
  for (int64_t i = 0; i < count; ++i) {  // in sample order, as one process sums
    const double* row = rows.data() + static_cast<size_t>(i) * width;
    for (size_t o = 0; o < output_count; ++o, row += per_output) {
      DeployedOutputCheck& check = result.outputs[o];
      check.elements = static_cast<int64_t>(row[0]);
      for (size_t f = 0; f < files.size(); ++f) {
        const double* cell = row + 1 + 3 * f;
        FileCheck& file = check.files[f];
        cosine_sum[o][f] += cell[0];
        file.cosine_min = std::min(file.cosine_min, cell[0]);
        file.max_abs_error = std::max(file.max_abs_error, cell[1]);
        file.differing += static_cast<int64_t>(cell[2]);
      }
    }
  }
  result.samples = count;
  for (size_t o = 0; o < output_count; ++o)
    for (size_t f = 0; f < files.size(); ++f)
      result.outputs[o].files[f].cosine_mean = cosine_sum[o][f] / static_cast<double>(result.samples);
  return result;
}

std::string verification_text(const DeployedVerification& result) {
  std::string text = "samples: " + std::to_string(result.samples) + "\n";
  char cell[256];
  text += "output                          ";
  for (const std::string& role : result.roles) {
    std::snprintf(cell, sizeof cell, "  %-26s %-13s", ("cos(" + role + ",ptq) mean / min").c_str(),
                  ("max|" + role + "-ptq|").c_str());
    text += cell;
  }
  for (size_t f = 1; f < result.roles.size(); ++f) text += "  " + result.roles[f] + " == " + result.roles[0];
  text += "\n";
  for (const DeployedOutputCheck& o : result.outputs) {
    std::snprintf(cell, sizeof cell, "%-32s", o.name.c_str());
    text += cell;
    for (const FileCheck& f : o.files) {
      std::snprintf(cell, sizeof cell, "  %.6f / %.6f        %-13.6g", f.cosine_mean, f.cosine_min, f.max_abs_error);
      text += cell;
    }
    const auto elements = static_cast<long long>(o.elements * result.samples);
    for (size_t f = 1; f < o.files.size(); ++f) {
      const long long equal = elements - o.files[f].differing;
      const double rate = elements ? 100.0 * static_cast<double>(equal) / static_cast<double>(elements) : 0;
      std::snprintf(cell, sizeof cell, "  %.4f%% (%lld/%lld)", rate, equal, elements);
      text += cell;
    }
    text += "\n";
  }
  for (size_t f = 1; f < result.roles.size(); ++f) {
    const bool same = std::all_of(result.outputs.begin(), result.outputs.end(),
                                  [&](const DeployedOutputCheck& o) { return o.files[f].differing == 0; });
    text += "the " + result.descriptions[f] + (same ? " is bit-identical to the " : " DIFFERS from the ") +
            result.descriptions[0] + (same ? " on every sample\n" : "\n");
  }
  return text;
}

Expected<std::string> verification_json(const DeployedVerification& result) {
  JsonWriter json;
  json.begin_object();
  json.field("samples", result.samples);
  json.field("bit_identical", result.bit_identical());
  json.key("roles").begin_array();
  for (const std::string& role : result.roles) json.value(role);
  json.end_array();
  json.key("outputs").begin_array();
  for (const DeployedOutputCheck& o : result.outputs) {
    json.begin_object();
    json.field("name", o.name);
    json.field("elements", o.elements);
    for (size_t f = 0; f < o.files.size(); ++f) {
      const std::string& role = result.roles[f];
      json.field(role + "_cosine_mean", o.files[f].cosine_mean);
      json.field(role + "_cosine_min", o.files[f].cosine_min);
      json.field(role + "_max_abs_error", o.files[f].max_abs_error);
    }
    // Over all samples and the files after the first.
    int64_t differing = 0;
    for (const FileCheck& file : o.files) differing += file.differing;
    const int64_t compared = o.elements * result.samples * static_cast<int64_t>(o.files.size() - 1);
    json.field("exact_matches", compared - differing);
    json.field("compared", compared);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.finish();
}

std::string difference_message(const DeployedVerification& result) {
  for (size_t f = 1; f < result.roles.size(); ++f)
    for (const DeployedOutputCheck& o : result.outputs)
      if (o.files[f].differing != 0)
        return "verify: the " + result.descriptions[f] + " differs from the " + result.descriptions[0];
  return "";
}

}  // namespace qflow
