// Datasets of several model inputs: one source per named input, read in step, bound to the
// model's inputs, and observed, compared and searched like single-input datasets.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/data/input_feeds.h"
#include "framework/data/observe_sweep.h"
#include "framework/data/progress_bar.h"
#include "framework/quant/output_cosine.h"
#include "framework/onnx/onnx_export.h"
#include "framework/quant/sensitivity.h"
#include "framework/interpreter/executor.h"
#include "test_dataset_util.h"
#include "test_model_util.h"

namespace qflow {

using test::d;
using test::float_type;
using test::TempDir;
using test::write_npy;

namespace {

// frame [1, 4] and state [1, 2] -> y = frame * 2 + Tile(state, 2): two inputs of different
// shapes, as a streaming model's input and recurrent state.
Model two_input_model() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "two_inputs";
  Value* frame = g.get_or_create_value("frame");
  frame->type = float_type({d(1), d(4)});
  g.inputs.push_back(frame);
  Value* state = g.get_or_create_value("state");
  state->type = float_type({d(1), d(2)});
  g.inputs.push_back(state);
  Value* two = g.get_or_create_value("two");
  g.set_initializer(two, Tensor::scalar<float>(2.0f));
  Value* repeats = g.get_or_create_value("repeats");
  g.set_initializer(repeats, Tensor::from_vector<int64_t>({2}, {1, 2}));
  Value* scaled = g.get_or_create_value("scaled");
  Value* tiled = g.get_or_create_value("tiled");
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(4)});
  g.add_node("Mul", {frame, two}, {scaled}, "scale");
  g.add_node("Tile", {state, repeats}, {tiled}, "tile");
  g.add_node("Add", {scaled, tiled}, {y}, "add");
  g.outputs.push_back(y);
  return model;
}

// n samples of each input: frame row i holds i*10 + k, state row i holds -i - k/2.
struct TwoInputData {
  TempDir dir{"two_inputs"};
  std::string frames = dir.file("frames.npy");
  std::string states = dir.file("states.npy");
  explicit TwoInputData(int64_t n, int64_t state_rows = -1) {
    std::vector<float> f, s;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < 4; ++k) f.push_back(static_cast<float>(i * 10 + k));
    const int64_t m = state_rows < 0 ? n : state_rows;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < 2; ++k) s.push_back(-static_cast<float>(i) - static_cast<float>(k) * 0.5f);
    write_npy(frames, {n, 4}, f);
    write_npy(states, {m, 1, 2}, s);
  }
  std::string path() const { return "frame=" + frames + ",state=" + states; }
};

std::string open_error(const DataSpec& spec) {
  Expected<Dataset> dataset = open_dataset(spec);
  return dataset ? std::string("(opened)") : dataset.status().message();
}

}  // namespace

TEST_CASE("split_input_paths: one path, or NAME=PATH entries") {
  TempDir dir("split");
  const std::string odd = dir.file("a=b.npy");  // exists, so taken as written
  write_npy(odd, {1, 1}, {0.0f});
  auto one = split_input_paths(odd);
  REQUIRE(one.has_value());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].input.empty());
  CHECK((*one)[0].path == odd);

  auto named = split_input_paths("x=a.npy,state=dir/b.npy");
  REQUIRE(named.has_value());
  REQUIRE(named->size() == 2);
  CHECK((*named)[0].input == "x");
  CHECK((*named)[0].path == "a.npy");
  CHECK((*named)[1].input == "state");
  CHECK((*named)[1].path == "dir/b.npy");

  auto plain = split_input_paths("missing.npy");
  REQUIRE(plain.has_value());
  CHECK((*plain)[0].input.empty());

  auto twice = split_input_paths("x=a.npy,x=b.npy");
  REQUIRE_FALSE(twice.has_value());
  CHECK(twice.status().message() == "load-data option 'path' names input 'x' twice");
}

TEST_CASE("open_dataset reads several sources in step") {
  TwoInputData data(5);
  DataSpec spec{data.path()};
  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->count == 5);
  REQUIRE(dataset->sources.size() == 2);
  CHECK(dataset->sources[0].input == "frame");
  CHECK(dataset->sources[0].sample_shape == Shape{4});
  CHECK(dataset->sources[1].input == "state");
  CHECK(dataset->sources[1].sample_shape == Shape{1, 2});

  std::vector<int64_t> seen;
  REQUIRE(for_each_sample_in(*dataset, 1, 4, [&](int64_t index, const std::vector<Tensor>& samples) {
            REQUIRE(samples.size() == 2);
            CHECK(samples[0].data<float>()[0] == static_cast<float>(index * 10));
            CHECK(samples[1].data<float>()[0] == -static_cast<float>(index));
            seen.push_back(index);
            return Status::ok();
          }).is_ok());
  CHECK(seen == std::vector<int64_t>{1, 2, 3});

  Expected<std::string> json = dataset_json(*dataset);
  REQUIRE(json.has_value());
  CHECK(json->find("\"inputs\"") != std::string::npos);
  CHECK(json->find("\"input\": \"state\"") != std::string::npos);
}

TEST_CASE("open_dataset: sources must hold the same number of samples") {
  TwoInputData data(5, 4);
  CHECK(open_error(DataSpec{data.path()}) == "input 'state' (" + data.states + ") holds 4 samples, input 'frame' (" +
                                                 data.frames + ") holds 5; every input needs one sample per row");
}

TEST_CASE("open_dataset: a sample with NaN in one input is skipped in all, and the limit counts usable samples") {
  TempDir dir("nan_inputs");
  const std::string a = dir.file("a.npy"), b = dir.file("b.npy");
  write_npy(a, {4, 1}, {0.0f, 1.0f, 2.0f, 3.0f});
  write_npy(b, {4, 1}, {10.0f, std::numeric_limits<float>::quiet_NaN(), 12.0f, 13.0f});
  DataSpec spec{"a=" + a + ",b=" + b};
  CHECK(open_error(spec).find(b + ": sample 1 holds 1 NaN and 0 Inf values") == 0);

  spec.skip_nonfinite = true;
  spec.limit = 2;
  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->count == 2);
  REQUIRE(dataset->skipped.size() == 1);
  CHECK(dataset->skipped[0].source == 1);
  CHECK(dataset->skipped[0].row == 1);
  std::vector<std::pair<float, float>> pairs;
  REQUIRE(for_each_sample(*dataset, [&](int64_t, const std::vector<Tensor>& samples) {
            pairs.emplace_back(samples[0].data<float>()[0], samples[1].data<float>()[0]);
            return Status::ok();
          }).is_ok());
  CHECK(pairs == std::vector<std::pair<float, float>>{{0.0f, 10.0f}, {2.0f, 12.0f}});
  CHECK(dataset->sources[0].files[0].samples == 3);  // rows 0..2 read, row 3 past the limit
}

TEST_CASE("bind_inputs: named sources feed their inputs; a missing or unknown input is an error") {
  const Model model = two_input_model();
  TwoInputData data(3);
  Expected<Dataset> dataset = open_dataset(DataSpec{data.path()});
  REQUIRE(dataset.has_value());
  Expected<InputBinding> binding = bind_inputs(*model.graph, *dataset);
  REQUIRE_MESSAGE(binding.has_value(), binding.status().message());
  REQUIRE(binding->size() == 2);
  CHECK((*binding)[0].input == "frame");
  CHECK((*binding)[0].shape == Shape{1, 4});  // batch axis added
  CHECK((*binding)[1].input == "state");
  CHECK((*binding)[1].shape == Shape{1, 2});  // already the input's rank

  Expected<Dataset> only_frames = open_dataset(DataSpec{"frame=" + data.frames});
  REQUIRE(only_frames.has_value());
  CHECK(bind_inputs(*model.graph, *only_frames).status().message() ==
        "model input 'state' has no samples: load-data's path names no source for it");

  Expected<Dataset> unnamed = open_dataset(DataSpec{data.frames});
  REQUIRE(unnamed.has_value());
  CHECK(bind_inputs(*model.graph, *unnamed).status().message() ==
        "the model has 2 inputs ('frame', 'state') and load-data one path; give one per input: path = "
        "\"NAME=PATH,NAME=PATH\"");

  Expected<Dataset> typo = open_dataset(DataSpec{"frame=" + data.frames + ",stat=" + data.states});
  REQUIRE(typo.has_value());
  CHECK(bind_inputs(*model.graph, *typo).status().message() ==
        "load-data path '" + data.states + "' is for input 'stat', the model's inputs are 'frame', 'state'");

  Expected<Dataset> swapped = open_dataset(DataSpec{"frame=" + data.states + ",state=" + data.frames});
  REQUIRE(swapped.has_value());
  CHECK(bind_inputs(*model.graph, *swapped).status().message() ==
        "samples are float [1, 2], model input 'frame' takes float [1, 4]");
}

TEST_CASE("observe_dataset observes every input of a two-input model") {
  const Model model = two_input_model();
  TwoInputData data(40);  // two shards
  Expected<Dataset> dataset = open_dataset(DataSpec{data.path()});
  REQUIRE(dataset.has_value());
  Expected<InputBinding> binding = bind_inputs(*model.graph, *dataset);
  REQUIRE(binding.has_value());
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());

  // Records min and max of everything observed.
  struct Range : Observer {
    double lo = 1e300, hi = -1e300;
    Status observe(const Tensor& t) override {
      for (float v : t.span<float>()) {
        lo = std::min(lo, static_cast<double>(v));
        hi = std::max(hi, static_cast<double>(v));
      }
      return Status::ok();
    }
    Status merge(const Observer& other) override {
      const auto& o = static_cast<const Range&>(other);
      lo = std::min(lo, o.lo);
      hi = std::max(hi, o.hi);
      return Status::ok();
    }
    TensorStatistics statistics() const override {
      TensorStatistics s;
      s.min = lo;
      s.max = hi;
      return s;
    }
    std::string serialize() const override { return std::to_string(lo) + " " + std::to_string(hi); }
    Status deserialize(std::string_view) override { return Status::ok(); }
  };
  const ObserverFactory make = [] { return Expected<std::shared_ptr<Observer>>(std::make_shared<Range>()); };
  ObserveOptions options;
  options.threads = 2;
  Expected<ObserverMap> observed = observe_dataset(**executor, *binding, *dataset, make, options);
  REQUIRE_MESSAGE(observed.has_value(), observed.status().message());
  CHECK(observed->at("frame")->statistics().max == 393.0);  // 39 * 10 + 3
  CHECK(observed->at("state")->statistics().min == -39.5);
  // y = 2 * frame + state: largest at sample 39, k = 3 (state index 1): 786 - 39.5.
  CHECK(observed->at("y")->statistics().max == 746.5);
}

TEST_CASE("sensitivity and output cosine run a two-input model") {
  const Model model = two_input_model();
  TwoInputData data(6);
  Expected<Dataset> dataset = open_dataset(DataSpec{data.path()});
  REQUIRE(dataset.has_value());
  const QuantTable table = {{"frame", test::params(60.0)},   {"state", test::params(6.0)},
                            {"scaled", test::params(120.0)}, {"tiled", test::params(6.0)},
                            {"y", test::params(120.0)}};
  SensitivityOptions ranking;
  ranking.threads = 2;
  Expected<SensitivityResult> sensitivity = analyze_sensitivity(model, table, nullptr, *dataset, ranking);
  REQUIRE_MESSAGE(sensitivity.has_value(), sensitivity.status().message());
  CHECK(sensitivity->samples == 6);
  CHECK_FALSE(sensitivity->rows.empty());

  Expected<std::string> bytes = export_onnx_bytes(model);
  REQUIRE(bytes.has_value());
  auto cosine = OutputCosine::create(*bytes, *dataset, nullptr, 2);
  REQUIRE_MESSAGE(cosine.has_value(), cosine.status().message());
  std::string progress;
  ProgressBar bar("stage 'calibrate'", 0, [&](std::string_view text) { progress += text; });
  (*cosine)->set_progress(&bar);
  Expected<double> value = (*cosine)->evaluate(table);
  REQUIRE_MESSAGE(value.has_value(), value.status().message());
  CHECK(*value > 0.999);
  CHECK(*value < 1.0);  // quantization changed something: the QDQ model really ran
  // A phase per sweep, each counting every sample.
  REQUIRE((*cosine)->evaluate(table).has_value());
  bar.finish();
  const std::string all = std::to_string(dataset->count) + "/" + std::to_string(dataset->count) + " samples";
  CHECK(progress.find("stage 'calibrate' float outputs  " + all) != std::string::npos);
  CHECK(progress.find("stage 'calibrate' table 1  " + all) != std::string::npos);
  CHECK(progress.find("stage 'calibrate' table 2  " + all) != std::string::npos);
}

}  // namespace qflow
