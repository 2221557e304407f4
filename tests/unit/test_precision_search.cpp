// Unit tests for the automatic precision search (framework/quant/precision_search).
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "framework/data/npy.h"
#include "framework/quant/precision_search.h"
#include "framework/quant/quantization_settings.h"
#include "test_dataset_util.h"
#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::params;
using test::wave;

Model mlp() { return test::mlp_model(Tensor::from_vector<float>({8, 8}, wave(64, 0.53, 1.0))); }

// A good table, or one whose 'a' range is 100x too wide: int8 steps of 2.4 on values of a
// few units ruin mm1's output; int16 steps of 0.009 do not.
QuantTable table(bool outlier) {
  return {{"x", params(1.5)}, {"a", params(outlier ? 300.0 : 4.0)}, {"b", params(6.0)}, {"y", params(12.0)}};
}

struct Fixture {
  test::TempDir dir{"precision"};
  Dataset dataset;
  Fixture() {
    const int64_t n = 8;
    const std::string path = dir.file("x.npy");
    REQUIRE(write_npy_file(path, Tensor::from_vector<float>({n, 1, 8}, wave(static_cast<std::size_t>(n * 8), 0.91, 1.5)))
                .is_ok());
    auto opened = open_dataset(DataSpec{path});
    REQUIRE(opened.has_value());
    dataset = std::move(*opened);
  }
};

bool has_int16(const Model& model) {
  for (const Value* v : model.graph->initializer_order())
    if (model.graph->initializer(v)->dtype() == DType::Int16) return true;
  return false;
}

}  // namespace

TEST_CASE("precision search: a model that meets the target needs no change") {
  Fixture f;
  PrecisionSearchOptions options;
  options.target_cosine = 0.99;
  auto result = search_precision(mlp(), table(false), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->before >= 0.99);
  CHECK(result->after == result->before);
  CHECK(result->changes.empty());
  CHECK(result->overrides.nodes.empty());
  CHECK(result->evaluations == 1);
  CHECK(result->quantized_tensors == 6);  // x, a, b, y and the two weights
  CHECK(precision_overrides_toml(*result).empty());
  CHECK(precision_overrides_file(*result).find("no change needed") != std::string::npos);
}

TEST_CASE("precision search: the outlier activation goes to int16; replay through the JSON gives the same overrides") {
  Fixture f;
  PrecisionSearchOptions options;
  options.target_cosine = 0.99;
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->before < 0.99);
  CHECK(result->after >= 0.99);
  REQUIRE(result->changes.size() == 1);
  const PrecisionChange& c = result->changes[0];
  CHECK(c.node == "mm1");
  CHECK(c.to == "int16");
  CHECK(c.from == "int8");
  CHECK(c.activation);
  CHECK_FALSE(c.weight);
  CHECK(c.tensors == std::vector<std::string>{"a"});
  CHECK(c.value_after == result->after);
  CHECK(c.sensitivity < 0.99);
  CHECK(result->raised_tensors == 1);
  REQUIRE(result->overrides.nodes.count("mm1"));
  CHECK(result->overrides.nodes.at("mm1").activation_dtype == DType::Int16);
  CHECK(precision_overrides_toml(*result) == "[quantization.node.mm1]\nactivation-dtype = \"int16\"\n");

  auto json = precision_json(*result);
  REQUIRE(json.has_value());
  auto back = precision_replay_from_json(*json, "precision.json");
  REQUIRE_MESSAGE(back.has_value(), back.status().message());
  CHECK(back->overrides.nodes.size() == 1);
  CHECK(back->overrides.nodes.at("mm1").activation_dtype == DType::Int16);
  CHECK_FALSE(back->observed_ranges);

  // The replayed table: 'a' recomputed for int16 from its threshold, the rest kept.
  const QuantConfig merged = merge_quant_config(QuantConfig{}, back->overrides);
  const Model model = mlp();
  auto retabled = table_for_config(*model.graph, table(true), &merged);
  REQUIRE(retabled.has_value());
  CHECK(retabled->at("a").dtype == DType::Int16);
  CHECK(retabled->at("a").scale[0] == static_cast<float>(300.0 / 32767.0));
  CHECK(retabled->at("b").scale == table(true).at("b").scale);
}

TEST_CASE("precision search: with statistics a raised activation takes its observed range") {
  Fixture f;
  // 'a' observed in [-3, 4]: its int8 entry clips at 300 (the outlier table); raised to
  // int16 with the statistics it covers 4, without them it keeps 300.
  TensorStatistics observed;
  observed.count = 64;
  observed.min = -3.0;
  observed.max = 4.0;
  const std::map<std::string, TensorStatistics> statistics = {{"a", observed}};
  PrecisionSearchOptions options;
  options.target_cosine = 0.99;
  options.statistics = &statistics;
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->observed_ranges);
  REQUIRE(result->changes.size() == 1);
  CHECK(result->changes[0].tensors == std::vector<std::string>{"a"});
  auto json = precision_json(*result);
  REQUIRE(json.has_value());
  auto replay = precision_replay_from_json(*json, "precision.json");
  REQUIRE(replay.has_value());
  CHECK(replay->observed_ranges);

  const QuantConfig merged = merge_quant_config(QuantConfig{}, result->overrides);
  const Model model = mlp();
  auto retabled = table_for_config(*model.graph, table(true), &merged, &statistics);
  REQUIRE(retabled.has_value());
  CHECK(retabled->at("a").dtype == DType::Int16);
  CHECK(retabled->at("a").scale[0] == static_cast<float>(4.0 / 32767.0));
  CHECK(retabled->at("a").method == "max");
  auto kept = table_for_config(*model.graph, table(true), &merged);
  REQUIRE(kept.has_value());
  CHECK(kept->at("a").scale[0] == static_cast<float>(300.0 / 32767.0));

  // A search without statistics says so; a precision.json without the key predates it.
  options.statistics = nullptr;
  auto plain = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE(plain.has_value());
  auto plain_json = precision_json(*plain);
  REQUIRE(plain_json.has_value());
  CHECK(plain_json->find("\"ranges\": \"threshold\"") != std::string::npos);
  CHECK_FALSE(precision_replay_from_json("{\"overrides\": {}}", "old.json")->observed_ranges);
  CHECK_FALSE(precision_replay_from_json("{\"overrides\": {}, \"ranges\": 3}", "bad.json").has_value());
}

TEST_CASE("precision search: where the platform refuses int16 the node goes to the CPU") {
  Fixture f;
  PrecisionSearchOptions options;
  options.target_cosine = 0.99;
  int calls = 0;
  options.oracle = [&](const Model& ptq) -> Expected<std::map<std::string, std::string>> {
    ++calls;
    return std::map<std::string, std::string>{{"mm1", has_int16(ptq) ? "MatMul input 'a' is int16 (allowed: int8)" : ""},
                                              {"add", ""}, {"mm2", ""}};
  };
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(calls >= 2);
  // mm1 goes to the CPU; its output 'a' stays int8 while 'add' (quantized) reads it, so
  // 'add' follows (its int16 raise is refused too: any int16 takes mm1 off the BPU).
  REQUIRE(result->changes.size() == 2);
  const PrecisionChange& c = result->changes[0];
  CHECK(c.node == "mm1");
  CHECK(c.to == "cpu");
  CHECK(c.refusal == "mm1: MatMul input 'a' is int16 (allowed: int8)");
  CHECK(c.tensors == std::vector<std::string>{"a", "W1"});
  CHECK(result->changes[1].node == "add");
  CHECK(result->changes[1].to == "cpu");
  CHECK(result->overrides.nodes.at("mm1").quantize == false);
  CHECK(result->overrides.nodes.at("add").quantize == false);
  CHECK_FALSE(result->overrides.nodes.at("mm1").activation_dtype.has_value());
  CHECK(result->after >= 0.99);
  CHECK(precision_overrides_toml(*result) ==
        "[quantization.node.add]\nquantize = false\n[quantization.node.mm1]\nquantize = false\n");
}

TEST_CASE("precision search: pruning drops a change the target does not need") {
  Fixture f;
  // A ranking that puts 'add' first: the greedy pass raises it, then mm1; only mm1 matters.
  SensitivityResult ranking;
  SensitivityRow add;
  add.node = "add";
  add.op_type = "Add";
  add.has_activation = true;
  add.activation_cosine = 0.5;
  SensitivityRow mm1;
  mm1.node = "mm1";
  mm1.op_type = "MatMul";
  mm1.has_activation = mm1.has_weight = true;
  mm1.activation_cosine = 0.6;
  mm1.weight_cosine = 0.9999;
  ranking.rows = {add, mm1};
  PrecisionSearchOptions options;
  options.target_cosine = 0.99;
  options.sensitivity = &ranking;
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  REQUIRE(result->changes.size() == 1);
  CHECK(result->changes[0].node == "mm1");
  CHECK(result->changes[0].sensitivity == 0.6);
  CHECK(result->overrides.nodes.size() == 1);
  CHECK(result->after >= 0.99);
  CHECK(result->changes[0].value_after == result->after);

  // The same ranking with at most one change: the search stops at the limit and keeps the
  // best configuration it measured ('add' alone, a little better than none), or fails on
  // request.
  options.max_changes = 1;
  auto limited = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(limited.has_value(), limited.status().message());
  CHECK_FALSE(limited->reached);
  CHECK(limited->miss.find("max-changes (1) reached with cosine") != std::string::npos);
  CHECK(limited->after >= limited->before);
  CHECK(limited->changes.size() <= 1);
  options.error_on_miss = true;
  auto failed = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.status().message().find("max-changes (1) reached with cosine") != std::string::npos);
}

TEST_CASE("precision search: an impossible target keeps the best model measured, or fails on request") {
  Fixture f;
  PrecisionSearchOptions options;
  options.target_cosine = 1.5;
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK_FALSE(result->reached);
  CHECK(result->miss.find("the candidates ran out after") != std::string::npos);
  CHECK(result->miss.find("kept the best configuration measured") != std::string::npos);
  // int16 on mm1 repairs the outlier: the best configuration is far above plain PTQ.
  CHECK(result->after > result->before);
  CHECK(result->after > 0.99);
  REQUIRE_FALSE(result->changes.empty());
  for (const PrecisionChange& c : result->changes) CHECK(c.value_after <= result->after);
  auto json = precision_json(*result);
  REQUIRE(json.has_value());
  CHECK(json->find("\"reached\": false") != std::string::npos);

  options.error_on_miss = true;
  auto failed = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_FALSE(failed.has_value());
  const std::string message = failed.status().message();
  CHECK(message.find("the candidates ran out after") != std::string::npos);
  CHECK(message.find("target 1.500000") != std::string::npos);
  CHECK(message.find("plain PTQ: ") != std::string::npos);
}

TEST_CASE("table_for_config: a node moved to the CPU keeps its int16 output where quantized nodes read it") {
  // mm1 in float; 'a', its output, is still quantized because add (quantized) reads it.
  TensorStatistics observed;
  observed.count = 64;
  observed.min = -3.0;
  observed.max = 4.0;
  const std::map<std::string, TensorStatistics> statistics = {{"a", observed}};
  const Model model = mlp();
  QuantConfig moved;
  moved.nodes["mm1"].quantize = false;
  auto plain = table_for_config(*model.graph, table(true), &moved, &statistics);
  REQUIRE(plain.has_value());
  CHECK(plain->at("a").dtype == DType::Int8);
  CHECK(plain->at("a").scale[0] == static_cast<float>(300.0 / 127.0));
  moved.nodes["mm1"].activation_dtype = DType::Int16;
  auto raised = table_for_config(*model.graph, table(true), &moved, &statistics);
  REQUIRE(raised.has_value());
  CHECK(raised->at("a").dtype == DType::Int16);
  CHECK(raised->at("a").scale[0] == static_cast<float>(4.0 / 32767.0));
  // The entry follows the spec even where nothing quantizes the tensor (y, the output of a
  // float node): a Concat group holding it must share one type.
  moved.nodes["mm2"].quantize = false;
  moved.nodes["mm2"].activation_dtype = DType::Int16;
  auto output = table_for_config(*model.graph, table(true), &moved, &statistics);
  REQUIRE(output.has_value());
  CHECK(output->at("y").dtype == DType::Int16);
}

// x -> mm1 (a), x -> mm1b (a2), Concat(a, a2) -> c, c -> mm2 (y). The Concat group
// {a, a2, c} shares one set of parameters: with a2's range 100x too wide, every member
// gets int8 steps of 2.4.
Model concat_mlp() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "concat_mlp";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(8)});
  g.inputs.push_back(x);
  Value* w1 = g.get_or_create_value("W1");
  g.set_initializer(w1, Tensor::from_vector<float>({8, 8}, wave(64, 0.53, 1.0)));
  Value* w1b = g.get_or_create_value("W1b");
  g.set_initializer(w1b, Tensor::from_vector<float>({8, 8}, wave(64, 0.61, 0.8)));
  Value* w2 = g.get_or_create_value("W2");
  g.set_initializer(w2, Tensor::from_vector<float>({16, 4}, wave(64, 0.77, 0.9)));
  Value* a = g.get_or_create_value("a");
  Value* a2 = g.get_or_create_value("a2");
  Value* c = g.get_or_create_value("c");
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(4)});
  g.add_node("MatMul", {x, w1}, {a}, "mm1");
  g.add_node("MatMul", {x, w1b}, {a2}, "mm1b");
  Node* cat = g.add_node("Concat", {a, a2}, {c}, "cat");
  cat->set_attribute(Attribute::make_int("axis", 1));
  g.add_node("MatMul", {c, w2}, {y}, "mm2");
  g.outputs.push_back(y);
  return model;
}

TEST_CASE("precision search: an output in a Concat group goes to int16 with the whole group") {
  Fixture f;
  const QuantTable concat_table = {
      {"x", params(1.5)}, {"a", params(4.0)}, {"a2", params(400.0)}, {"c", params(4.0)}, {"y", params(12.0)}};
  PrecisionSearchOptions options;
  options.target_cosine = 0.998;
  auto result = search_precision(concat_mlp(), concat_table, nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->before < 0.99);
  CHECK(result->reached);
  REQUIRE(result->changes.size() == 1);
  const PrecisionChange& change = result->changes[0];
  CHECK(change.to == "int16");
  CHECK(change.activation);
  REQUIRE(change.with.size() == 2);  // the other two producers of {a, a2, c}
  std::set<std::string> raised = {change.node, change.with[0], change.with[1]};
  CHECK(raised == std::set<std::string>{"cat", "mm1", "mm1b"});
  for (const std::string& n : raised) CHECK(result->overrides.nodes.at(n).activation_dtype == DType::Int16);
  auto json = precision_json(*result);
  REQUIRE(json.has_value());
  CHECK(json->find("\"with\": [") != std::string::npos);
}

TEST_CASE("precision search: when int16 is not enough, nodes move to float on the CPU") {
  Fixture f;
  // int16 on mm2 and add reaches 0.99962, not this; mm1 in float does (0.99971).
  PrecisionSearchOptions options;
  options.target_cosine = 0.99966;
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->reached);
  CHECK(result->after >= 0.99966);
  bool cpu = false;
  for (const PrecisionChange& c : result->changes) cpu = cpu || c.to == "cpu";
  CHECK(cpu);
  for (const PrecisionChange& c : result->changes) CHECK_FALSE(std::isnan(c.value_after));
  // A node raised first and then moved keeps its output's int16 in the overrides.
  for (const PrecisionChange& c : result->changes)
    if (c.to == "cpu" && c.activation) CHECK(result->overrides.nodes.at(c.node).activation_dtype == DType::Int16);
}

namespace {

// A ranking that names every node's output as its sensitive side, so raises along it never
// touch a weight.
SensitivityResult activations_first_ranking() {
  SensitivityResult ranking;
  for (const auto& [node, op] : std::vector<std::pair<std::string, std::string>>{{"mm1", "MatMul"}, {"add", "Add"}, {"mm2", "MatMul"}}) {
    SensitivityRow row;
    row.node = node;
    row.op_type = op;
    row.has_activation = true;
    row.activation_cosine = 0.5;
    row.has_weight = op == "MatMul";
    row.weight_cosine = 1.0;
    ranking.rows.push_back(row);
  }
  return ranking;
}

// The output cosine of the PTQ model with `overrides` (nothing reaches a target of 2, so
// the search measures the plain model only).
double cosine_with(Fixture& f, const QuantConfig& overrides) {
  PrecisionSearchOptions options;
  options.target_cosine = 2.0;
  options.max_evaluations = 1;
  auto result = search_precision(mlp(), table(false), &overrides, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  return result->before;
}

bool int16_weight(const Model& ptq, const std::string& weight) {
  for (const Value* v : ptq.graph->initializer_order())
    if (v->name().rfind(weight + "_quantized", 0) == 0 && ptq.graph->initializer(v)->dtype() == DType::Int16) return true;
  return false;
}

}  // namespace

TEST_CASE("precision search: where raises one side at a time miss, the all-int16 model is lowered") {
  Fixture f;
  QuantConfig outputs16, all16, all16_but_w2;
  for (const char* node : {"mm1", "add", "mm2"}) {
    outputs16.nodes[node].activation_dtype = DType::Int16;
    all16.nodes[node].activation_dtype = DType::Int16;
    all16_but_w2.nodes[node].activation_dtype = DType::Int16;
  }
  all16.nodes["mm1"].weight_dtype = all16.nodes["mm2"].weight_dtype = DType::Int16;
  all16_but_w2.nodes["mm1"].weight_dtype = DType::Int16;
  const double outputs_only = cosine_with(f, outputs16), every = cosine_with(f, all16), but_w2 = cosine_with(f, all16_but_w2);
  // The weights' int8 grids are what the raise walk cannot repair here.
  REQUIRE(every > outputs_only);
  REQUIRE(but_w2 > outputs_only);
  const SensitivityResult ranking = activations_first_ranking();
  PrecisionSearchOptions options;
  options.sensitivity = &ranking;
  options.target_cosine = (outputs_only + std::min(every, but_w2)) / 2;
  auto result = search_precision(mlp(), table(false), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->reached);
  CHECK(result->lowered);
  CHECK(result->after >= options.target_cosine);
  bool weight = false;
  for (const PrecisionChange& c : result->changes) {
    CHECK(c.to == "int16");
    weight = weight || c.weight;
  }
  CHECK(weight);
  auto json = precision_json(*result);
  REQUIRE(json.has_value());
  CHECK(json->find("\"walk\": \"lower\"") != std::string::npos);

  // A platform that refuses mm2's weight at int16: the lowering starts from the model
  // without it, and mm2 stays on the accelerator.
  options.oracle = [&](const Model& ptq) -> Expected<std::map<std::string, std::string>> {
    return std::map<std::string, std::string>{
        {"mm1", ""}, {"add", ""}, {"mm2", int16_weight(ptq, "W2") ? "MatMul weight is int16 (allowed: int8)" : ""}};
  };
  auto placed = search_precision(mlp(), table(false), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(placed.has_value(), placed.status().message());
  CHECK(placed->reached);
  CHECK(placed->lowered);
  for (const PrecisionChange& c : placed->changes) {
    CHECK(c.to == "int16");
    if (c.node == "mm2") CHECK_FALSE(c.weight);
  }
  CHECK_FALSE(placed->overrides.nodes["mm2"].weight_dtype.has_value());
  CHECK(placed->overrides.nodes["mm1"].weight_dtype == DType::Int16);
}

TEST_CASE("precision search: without pruning the shortest reaching prefix of the ranking is kept") {
  Fixture f;
  PrecisionSearchOptions options;
  options.target_cosine = 0.99966;
  auto pruned = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(pruned.has_value(), pruned.status().message());
  options.prune = false;
  auto prefix = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(prefix.has_value(), prefix.status().message());
  CHECK(prefix->reached);
  CHECK(prefix->after >= 0.99966);
  CHECK(prefix->evaluations < pruned->evaluations);
  CHECK(prefix->changes.size() >= pruned->changes.size());
  REQUIRE_FALSE(prefix->changes.empty());
  CHECK(prefix->changes.back().value_after == prefix->after);
  // Without the last change the target is missed: the prefix is the shortest.
  std::vector<PrecisionChange> shorter(prefix->changes.begin(), prefix->changes.end() - 1);
  QuantConfig overrides;
  for (const PrecisionChange& c : shorter) {
    if (c.to == "cpu") overrides.nodes[c.node].quantize = false;
    if (c.activation) overrides.nodes[c.node].activation_dtype = DType::Int16;
    if (c.weight) overrides.nodes[c.node].weight_dtype = DType::Int16;
  }
  options.target_cosine = 2.0;  // nothing reaches it: the plain value of `overrides` is measured
  options.max_evaluations = 1;
  auto shorter_value = search_precision(mlp(), table(true), &overrides, f.dataset, options);
  REQUIRE(shorter_value.has_value());
  CHECK(shorter_value->before < 0.99966);
}

TEST_CASE("precision search: the evaluation budget bounds the work") {
  Fixture f;
  PrecisionSearchOptions options;
  options.target_cosine = 1.5;
  options.max_evaluations = 3;
  auto result = search_precision(mlp(), table(true), nullptr, f.dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK_FALSE(result->reached);
  CHECK(result->evaluations <= 3);
  CHECK(result->miss.find("max-evaluations (3) reached") != std::string::npos);
}

TEST_CASE("precision search: models proven below the target stop early, with the result of whole evaluations") {
  // max-evaluations turns the early stop off: a budget counts whole models.
  Fixture f;
  for (const double target : {0.99966, 1.5}) {  // reached with CPU moves; missed (the best is finished)
    CAPTURE(target);
    PrecisionSearchOptions options;
    options.target_cosine = target;
    std::vector<std::string> lines;
    options.progress = [&](const std::string& line) { lines.push_back(line); };
    auto early = search_precision(mlp(), table(true), nullptr, f.dataset, options);
    REQUIRE_MESSAGE(early.has_value(), early.status().message());
    int stopped = 0;
    for (const std::string& line : lines) stopped += line.find("below 1.5") != std::string::npos ||
                                                     line.find("below 0.99966") != std::string::npos;
    CHECK(stopped > 0);
    options.max_evaluations = 1000;
    options.progress = nullptr;
    auto whole = search_precision(mlp(), table(true), nullptr, f.dataset, options);
    REQUIRE_MESSAGE(whole.has_value(), whole.status().message());
    CHECK(early->reached == whole->reached);
    CHECK(early->after == whole->after);
    CHECK(early->miss == whole->miss);
    CHECK(format_quantization(early->overrides) == format_quantization(whole->overrides));
    REQUIRE(early->changes.size() == whole->changes.size());
    for (std::size_t i = 0; i < early->changes.size(); ++i) {
      CHECK(early->changes[i].node == whole->changes[i].node);
      CHECK(early->changes[i].to == whole->changes[i].to);
    }
  }
}

TEST_CASE("precision search: a precision.json without overrides is refused") {
  auto bad = precision_replay_from_json("{\"ranking\": []}", "x.json");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().message().find("not a precision.json") != std::string::npos);
  auto wrong = precision_replay_from_json("{\"overrides\": {\"n\": {\"activation-dtype\": \"int4\"}}}", "x.json");
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.status().message().find("node 'n'") != std::string::npos);
}

TEST_CASE("precision: merged overrides keep every key the base or the overrides set") {
  QuantConfig base;
  base.model.reduce_range = true;
  base.nodes["n"].per_channel = false;
  QuantConfig overrides;
  overrides.nodes["n"].activation_dtype = DType::Int16;
  overrides.nodes["n"].reduce_range = false;
  overrides.op_types["Conv"].power_of_two = true;
  const QuantConfig merged = merge_quant_config(base, overrides);
  CHECK(merged.model.reduce_range == true);
  CHECK(merged.nodes.at("n").per_channel == false);
  CHECK(merged.nodes.at("n").activation_dtype == DType::Int16);
  CHECK(merged.nodes.at("n").reduce_range == false);
  CHECK(merged.op_types.at("Conv").power_of_two == true);
  const QuantSpec spec = merged.resolve("n", "Conv");
  CHECK_FALSE(spec.reduce_range);
  CHECK(spec.power_of_two);
}

TEST_CASE("table_for_config: uint8 entries become asymmetric int8 with the same scale, the zero point moved") {
  // A QAT export's uint8 activation (zero point 73) on settings that ask for asymmetric int8.
  QuantParams u8;
  u8.dtype = DType::UInt8;
  u8.scale = {0.0111f};
  u8.zero_point = {73};
  u8.method = "load";
  QuantTable loaded = table(false);
  loaded["a"] = u8;
  QuantConfig asymmetric;
  asymmetric.model.activation_dtype = DType::Int8;
  asymmetric.model.symmetric = false;
  const Model model = mlp();
  auto retabled = table_for_config(*model.graph, loaded, &asymmetric);
  REQUIRE_MESSAGE(retabled.has_value(), retabled.status().message());
  const QuantParams& a = retabled->at("a");
  CHECK(a.dtype == DType::Int8);
  CHECK(a.scale == u8.scale);
  CHECK(a.zero_point == std::vector<int64_t>{73 - 128});
  // Symmetric settings cannot keep the grid: the range the entry represents is re-fitted.
  QuantConfig symmetric;
  auto refit = table_for_config(*model.graph, loaded, &symmetric);
  REQUIRE(refit.has_value());
  CHECK(refit->at("a").dtype == DType::Int8);
  CHECK(refit->at("a").zero_point == std::vector<int64_t>{0});
  CHECK(refit->at("a").scale != u8.scale);
}

}  // namespace qflow
