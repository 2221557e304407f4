// A pass stage whose pass reports types_stale: the host infers types again and reruns the
// pass, so shape-folding takes nested shape tests apart one If per round.
#include <doctest/doctest.h>

#include <unistd.h>

#include <climits>
#include <filesystem>

#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/stage_execution.h"
#include "framework/plugin/component_registry.h"
#include "test_model_util.h"

namespace qflow {

using test::d;
using test::float_type;

namespace {

// The built-in passes library next to this build's libqflow_core (bin/../lib/qflow/plugins).
const ComponentRegistry& passes() {
  static ComponentRegistry instance;
  static const Status loaded = [] {
    char buffer[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
    const std::filesystem::path exe(std::string(buffer, static_cast<std::size_t>(n > 0 ? n : 0)));
    return instance.load_library(
        (exe.parent_path().parent_path() / "lib" / "qflow" / "plugins" / "libqflow_passes.so").string());
  }();
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.message(), " (build the qflow_passes target)");
  return instance;
}

// cond = Shape(v)[0] == size, as exporters test a dimension.
Value* dimension_is(Graph& g, Value* v, int64_t size, const std::string& tag) {
  Value* dims = g.get_or_create_value(tag + "_dims");
  g.add_node("Shape", {v}, {dims}, tag + "_shape");
  Value* zero = g.get_or_create_value(tag + "_zero");
  g.set_initializer(zero, Tensor::from_vector<int64_t>({}, {0}));
  Value* want = g.get_or_create_value(tag + "_want");
  g.set_initializer(want, Tensor::from_vector<int64_t>({}, {size}));
  Value* dim = g.get_or_create_value(tag + "_dim");
  g.add_node("Gather", {dims, zero}, {dim}, tag + "_gather");
  Value* cond = g.get_or_create_value(tag + "_cond");
  g.add_node("Equal", {dim, want}, {cond}, tag + "_equal");
  return cond;
}

std::shared_ptr<Graph> one_node_branch(const std::string& op, const std::string& in, const std::string& out) {
  auto b = std::make_shared<Graph>();
  Value* y = b->get_or_create_value(out);
  b->add_node(op, {b->get_or_create_value(in)}, {y}, out);
  b->outputs = {y};
  return b;
}

// x [1, 3]: if x has batch 1, squeeze it to s [3] and, if s has 3 elements, y = s, else
// y = -s. The inner test reads s, which only has a type once the outer If is inlined and
// types are inferred again.
Model nested_shape_tests() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(3)});
  g.inputs = {x};
  Value* outer_cond = dimension_is(g, x, 1, "outer");

  auto squeeze = std::make_shared<Graph>();
  {
    Graph& b = *squeeze;
    Value* axes = b.get_or_create_value("axes");
    b.set_initializer(axes, Tensor::from_vector<int64_t>({1}, {0}));
    Value* s = b.get_or_create_value("s");
    b.add_node("Squeeze", {b.get_or_create_value("x"), axes}, {s}, "squeeze");
    Value* inner_cond = dimension_is(b, s, 3, "inner");
    Value* picked = b.get_or_create_value("picked");
    Node* inner = b.add_node("If", {inner_cond}, {picked}, "inner_if");
    inner->set_attribute(Attribute::make_graph("then_branch", one_node_branch("Identity", "s", "kept")));
    inner->set_attribute(Attribute::make_graph("else_branch", one_node_branch("Neg", "s", "negated")));
    b.outputs = {picked};
  }
  Value* y = g.get_or_create_value("y");
  Node* outer = g.add_node("If", {outer_cond}, {y}, "outer_if");
  outer->set_attribute(Attribute::make_graph("then_branch", squeeze));
  outer->set_attribute(Attribute::make_graph("else_branch", one_node_branch("Identity", "x", "unchanged")));
  g.outputs = {y};
  return model;
}

}  // namespace

TEST_CASE("pass stage: types_stale makes the host infer types and run the pass again") {
  Expected<std::string> bytes = export_onnx_bytes(nested_shape_tests());
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().message());
  Artifact model;
  model.type = ArtifactType::Model;
  model.bytes = *bytes;
  PipelineStage stage;
  stage.id = "shapes";
  stage.kind = StageKind::Pass;
  stage.component = "shape-folding";
  Expected<StageResult> result = execute_stage(stage, {{"model", &model}}, passes(), StageContext{});
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  // The outer If in the first run, the inner one in the second, on the types inferred between.
  REQUIRE(result->passes.size() == 1);
  CHECK(result->passes[0].counters.at("if-inlined") == 2);
  Expected<Model> folded = import_onnx_bytes(result->artifact.bytes, "shapes.onnx");
  REQUIRE(folded.has_value());
  for (const auto& node : folded->graph->nodes()) CHECK(node->op_type() != "If");
}

}  // namespace qflow
