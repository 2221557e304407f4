// Unit tests for the opset upgrade (framework/quant/opset_upgrade): the changelog table, each
// adapter's rewrite and the raised model computing what the original computed.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/opset_upgrade.h"
#include "framework/interpreter/executor.h"
#include "framework/interpreter/kernel_registry.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::wave;

// A model built node by node: float inputs with static shapes, constants as initializers.
struct ModelBuilder {
  Model model;
  Graph& g;
  std::map<std::string, Tensor> feeds;

  explicit ModelBuilder(int64_t opset) : g(*model.graph) {
    model.opset_imports.push_back({"", opset});
    g.name = "upgrade";
  }
  Value* input(const std::string& name, const Shape& shape, double step = 0.37) {
    Value* v = g.get_or_create_value(name);
    std::vector<Dim> dims;
    for (int64_t s : shape) dims.push_back(d(s));
    v->type = float_type(dims);
    g.inputs.push_back(v);
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    feeds[name] = Tensor::from_vector<float>(shape, wave(static_cast<std::size_t>(n), step, 1.5));
    return v;
  }
  Value* constant(const std::string& name, Tensor t) {
    Value* v = g.get_or_create_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  }
  Node* node(const std::string& op, const std::vector<Value*>& inputs, const std::vector<std::string>& outputs,
             std::vector<Attribute> attributes = {}) {
    std::vector<Value*> outs;
    for (const std::string& o : outputs) outs.push_back(g.get_or_create_value(o));
    Node* n = g.add_node(op, inputs, outs, op + "_node");
    for (Attribute& a : attributes) n->set_attribute(std::move(a));
    return n;
  }
  // libonnx's checker wants graph outputs typed: upgrade_and_compare declares the shapes the
  // interpreter computes for outputs left untyped here.
  void output(const std::string& name) { g.outputs.push_back(g.find_value(name)); }
};

std::map<std::string, Tensor> run(const Model& model, const std::map<std::string, Tensor>& feeds) {
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor.has_value(), executor.status().message());
  auto out = (*executor)->run(feeds);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return *out;
}

Model round_trip(const Model& model) {
  auto bytes = export_onnx_bytes(model);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().message());
  auto back = import_onnx_bytes(*bytes, "round trip");
  REQUIRE_MESSAGE(back.has_value(), back.status().message());
  return std::move(*back);
}

// Upgrades a copy (through export and import, which also runs libonnx's checker on the
// result) and checks every graph output is bit-identical to the original's.
Model upgrade_and_compare(ModelBuilder& b, int64_t target = 21) {
  const std::map<std::string, Tensor> before = run(b.model, b.feeds);
  for (Value* out : b.g.outputs)
    if (!out->type) {
      std::vector<Dim> dims;
      for (int64_t s : before.at(out->name()).shape()) dims.push_back(d(s));
      out->type = float_type(dims);
    }
  Model raised = round_trip(b.model);
  const Status status = upgrade_opset(raised, target);
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  CHECK(raised.opset("") == target);
  REQUIRE(raised.graph->validate().is_ok());
  Model reread = round_trip(raised);
  const std::map<std::string, Tensor> after = run(reread, b.feeds);
  for (const auto& [name, tensor] : before) {
    INFO("output ", name);
    REQUIRE(after.count(name));
    CHECK(after.at(name).shape() == tensor.shape());
    CHECK(after.at(name).bitwise_equal(tensor));
  }
  return raised;
}

const Node* only_node_in(const Graph& graph, const std::string& op) {
  const Node* found = nullptr;
  for (const auto& n : graph.nodes())
    if (n->op_type() == op) {
      REQUIRE(found == nullptr);
      found = n.get();
    }
  REQUIRE(found != nullptr);
  return found;
}

const Node* only_node(const Model& model, const std::string& op) { return only_node_in(*model.graph, op); }

}  // namespace

TEST_CASE("opset upgrade: the changelog table is sorted, complete in range and adapts what changed") {
  const auto changes = opset_changes();
  REQUIRE(!changes.empty());
  std::set<std::pair<std::string, int64_t>> seen;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const OpChange& c = changes[i];
    INFO(c.op, "-", c.version);
    CHECK(c.version > kOpsetUpgradeFrom);
    CHECK(c.version <= kOpsetUpgradeTo);
    CHECK(!c.what.empty());
    CHECK(seen.insert({std::string(c.op), c.version}).second);
    if (i > 0) {
      const OpChange& p = changes[i - 1];
      CHECK((p.version < c.version || (p.version == c.version && p.op < c.op)));
    }
  }
  // The changes that alter older nodes' meaning, as the changelog has them.
  std::set<std::string> adapted;
  for (const OpChange& c : changes)
    if (c.kind == OpChangeKind::Adapted) adapted.insert(std::string(c.op) + "-" + std::to_string(c.version));
  const std::set<std::string> expected = {
      "BatchNormalization-14", "RoiAlign-16",   "ReduceL1-18",  "ReduceL2-18",        "ReduceLogSum-18",
      "ReduceLogSumExp-18",    "ReduceMax-18",  "ReduceMean-18", "ReduceMin-18",      "ReduceProd-18",
      "ReduceSumSquare-18",    "Split-18",      "DFT-20",       "GridSample-20",      "GroupNormalization-21",
  };
  CHECK(adapted == expected);
  // The ops adapters add run at opset 21.
  for (const char* op : {"Shape", "Div", "Concat", "Unsqueeze", "Expand", "Reshape"})
    CHECK(KernelRegistry::builtin().supports("", op, kOpsetUpgradeTo));
}

TEST_CASE("opset upgrade: every adapted op has an adapter") {
  for (const OpChange& c : opset_changes()) {
    if (c.kind != OpChangeKind::Adapted) continue;
    INFO(c.op);
    ModelBuilder b(c.version - 1);
    Value* x = b.input("x", {1, 4, 3, 3});
    std::vector<Value*> inputs = {x};
    if (c.op == "GroupNormalization") {
      inputs.push_back(b.constant("s", Tensor::from_vector<float>({2}, {1.0f, 2.0f})));
      inputs.push_back(b.constant("b", Tensor::from_vector<float>({2}, {0.0f, 0.5f})));
    }
    Node* n = b.node(std::string(c.op), inputs, {"y"});
    if (c.op == "GroupNormalization") n->set_attribute(Attribute::make_int("num_groups", 2));
    b.output("y");
    CHECK(opset_upgrade_blockers(b.model, c.version).empty());
    CHECK(upgrade_opset(b.model, c.version).is_ok());
  }
}

TEST_CASE("opset upgrade: Reduce* axes attribute becomes an input, results unchanged") {
  for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                         "ReduceMin", "ReduceProd", "ReduceSumSquare"}) {
    INFO(op);
    ModelBuilder b(13);
    Value* x = b.input("x", {2, 3, 4});
    // ReduceLogSum needs positive sums: reduce |x| + 1 there.
    Value* source = x;
    if (std::string(op) == "ReduceLogSum") {
      b.node("Abs", {x}, {"ax"});
      b.node("Add", {b.g.find_value("ax"), b.constant("one", Tensor::scalar<float>(1.0f))}, {"px"});
      source = b.g.find_value("px");
    }
    b.node(op, {source}, {"y"}, {Attribute::make_ints("axes", {1, -1}), Attribute::make_int("keepdims", 0)});
    b.node(op, {source}, {"all"});  // no axes: every axis, before and after
    b.output("y");
    b.output("all");
    const Model raised = upgrade_and_compare(b);
    for (const auto& n : raised.graph->nodes()) {
      if (n->op_type() != op) continue;
      CHECK(n->find_attribute("axes") == nullptr);
      if (n->outputs()[0]->name() == "y") {
        REQUIRE(n->inputs().size() == 2);
        const Tensor* axes = raised.graph->initializer(n->input(1));
        REQUIRE(axes != nullptr);
        CHECK(axes->to_int64s() == std::vector<int64_t>{1, -1});
      } else {
        CHECK(n->inputs().size() == 1);
      }
    }
  }
}

TEST_CASE("opset upgrade: Split without split input gets num_outputs") {
  ModelBuilder b(13);
  Value* x = b.input("x", {2, 6});
  b.node("Split", {x}, {"a", "b", "c"}, {Attribute::make_int("axis", 1)});
  b.node("Split", {x, b.constant("sizes", Tensor::from_vector<int64_t>({2}, {4, 2}))}, {"p", "q"},
         {Attribute::make_int("axis", 1)});
  for (const char* o : {"a", "b", "c", "p", "q"}) b.output(o);
  const Model raised = upgrade_and_compare(b);
  for (const auto& n : raised.graph->nodes()) {
    if (n->outputs().size() == 3) {
      CHECK(n->attr_int("num_outputs", 0) == 3);
    } else {
      CHECK(n->find_attribute("num_outputs") == nullptr);
      CHECK(n->inputs().size() == 2);
    }
  }
}

TEST_CASE("opset upgrade: inference BatchNormalization stays, training outputs are refused") {
  ModelBuilder b(13);
  Value* x = b.input("x", {1, 2, 2, 2});
  std::vector<Value*> params = {x};
  for (const char* p : {"scale", "bias", "mean", "var"})
    params.push_back(b.constant(p, Tensor::from_vector<float>({2}, {0.5f, 1.5f})));
  b.node("BatchNormalization", params, {"y"});
  b.output("y");
  const Model raised = upgrade_and_compare(b);
  CHECK(only_node(raised, "BatchNormalization")->attributes().empty());

  ModelBuilder t(13);
  Value* tx = t.input("x", {1, 2, 2, 2});
  std::vector<Value*> tp = {tx};
  for (const char* p : {"scale", "bias", "mean", "var"}) tp.push_back(t.constant(p, Tensor::from_vector<float>({2}, {0.5f, 1.5f})));
  t.node("BatchNormalization", tp, {"y", "running_mean", "running_var", "saved_mean", "saved_var"});
  t.output("y");
  const std::vector<std::string> blockers = opset_upgrade_blockers(t.model, 21);
  REQUIRE(blockers.size() == 1);
  CHECK(blockers[0].find("BatchNormalization 'BatchNormalization_node' (changed at opset 14") == 0);
  CHECK(blockers[0].find("training-mode outputs") != std::string::npos);
  const Status status = upgrade_opset(t.model, 21);
  CHECK(status.code() == StatusCode::Unsupported);
  CHECK(status.message().find("cannot raise the model from opset 13 to 21: BatchNormalization") == 0);
  CHECK(t.model.opset("") == 13);
  // Raising only to 13 crosses no change.
  CHECK(opset_upgrade_blockers(t.model, 13).empty());
}

TEST_CASE("opset upgrade: RoiAlign, GridSample and DFT take the new spelling of their old meaning") {
  ModelBuilder roi(13);
  Value* x = roi.input("x", {1, 1, 4, 4});
  Value* rois = roi.constant("rois", Tensor::from_vector<float>({1, 4}, {0.0f, 0.0f, 2.0f, 2.0f}));
  Value* idx = roi.constant("idx", Tensor::from_vector<int64_t>({1}, {0}));
  roi.node("RoiAlign", {x, rois, idx}, {"y"});
  roi.output("y");
  REQUIRE(upgrade_opset(roi.model, 21).is_ok());
  CHECK(only_node(roi.model, "RoiAlign")->attr_string("coordinate_transformation_mode", "") == "output_half_pixel");

  ModelBuilder grid(16);
  Value* gx = grid.input("x", {1, 1, 3, 3});
  Value* gg = grid.input("grid", {1, 2, 2, 2});
  grid.node("GridSample", {gx, gg}, {"y"}, {Attribute::make_string("mode", "bicubic")});
  grid.node("GridSample", {gx, gg}, {"z"}, {Attribute::make_string("mode", "bilinear")});
  grid.node("GridSample", {gx, gg}, {"w"}, {Attribute::make_string("mode", "nearest")});
  grid.node("GridSample", {gx, gg}, {"v"});
  REQUIRE(upgrade_opset(grid.model, 21).is_ok());
  std::vector<std::string> modes;
  for (const auto& n : grid.model.graph->nodes()) modes.push_back(n->attr_string("mode", "(default)"));
  CHECK(modes == std::vector<std::string>{"cubic", "linear", "nearest", "(default)"});

  ModelBuilder dft(17);
  Value* signal = dft.input("x", {1, 8, 1});
  dft.node("DFT", {signal}, {"y"});
  dft.node("DFT", {signal}, {"z"}, {Attribute::make_int("axis", -2), Attribute::make_int("inverse", 1)});
  REQUIRE(upgrade_opset(dft.model, 20).is_ok());
  std::vector<int64_t> axes;
  for (const auto& n : dft.model.graph->nodes()) {
    CHECK(n->find_attribute("axis") == nullptr);
    REQUIRE(n->inputs().size() == 3);
    CHECK(n->input(1) == nullptr);
    const Tensor* axis = dft.model.graph->initializer(n->input(2));
    REQUIRE(axis != nullptr);
    CHECK(axis->rank() == 0);
    axes.push_back(axis->to_int64s()[0]);
  }
  CHECK(axes == std::vector<int64_t>{1, -2});
}

TEST_CASE("opset upgrade: RoiAlign, GridSample, DFT and GroupNormalization compute the same after raising") {
  SUBCASE("RoiAlign 13 -> 21") {
    ModelBuilder b(13);
    Value* x = b.input("x", {2, 3, 6, 5});
    Value* rois = b.constant("rois", Tensor::from_vector<float>({3, 4}, {0.0f, 0.0f, 3.0f, 3.0f, 1.2f, 0.7f, 4.1f, 5.3f,
                                                                      2.0f, 2.0f, 2.2f, 2.4f}));
    Value* idx = b.constant("idx", Tensor::from_vector<int64_t>({3}, {0, 1, 1}));
    b.node("RoiAlign", {x, rois, idx}, {"avg"}, {Attribute::make_int("output_height", 2), Attribute::make_int("output_width", 3)});
    b.node("RoiAlign", {x, rois, idx}, {"max"},
           {Attribute::make_string("mode", "max"), Attribute::make_int("sampling_ratio", 2),
            Attribute::make_float("spatial_scale", 0.5f)});
    b.output("avg");
    b.output("max");
    upgrade_and_compare(b);
  }
  SUBCASE("GridSample 16 -> 21") {
    ModelBuilder b(16);
    Value* x = b.input("x", {1, 2, 4, 5});
    Value* grid = b.input("grid", {1, 3, 4, 2}, 0.91);  // values in [-1.5, 1.5]: some outside the image
    int i = 0;
    for (const char* mode : {"bilinear", "bicubic", "nearest"})
      for (const char* padding : {"zeros", "border", "reflection"})
        for (int64_t align : {0, 1}) {
          std::string out = "y";  // built in two steps: GCC 12 warns (-Wrestrict) on "y" + to_string
          out += std::to_string(i++);
          b.node("GridSample", {x, grid}, {out},
                 {Attribute::make_string("mode", mode), Attribute::make_string("padding_mode", padding),
                  Attribute::make_int("align_corners", align)});
          b.output(out);
        }
    b.node("GridSample", {x, grid}, {"default"});
    b.output("default");
    upgrade_and_compare(b);
  }
  SUBCASE("DFT 17 -> 21") {
    ModelBuilder b(17);
    Value* real = b.input("real", {2, 6, 3, 1});
    Value* complex = b.input("complex", {2, 5, 2}, 0.53);
    b.node("DFT", {real}, {"forward"});
    b.node("DFT", {real, b.constant("len", Tensor::scalar<int64_t>(8))}, {"rfft"},
           {Attribute::make_int("axis", 2), Attribute::make_int("onesided", 1)});
    b.node("DFT", {complex}, {"inverse"}, {Attribute::make_int("inverse", 1), Attribute::make_int("axis", -2)});
    for (const char* o : {"forward", "rfft", "inverse"}) b.output(o);
    upgrade_and_compare(b);
  }
  SUBCASE("GroupNormalization 18 -> 21") {
    ModelBuilder b(18);
    Value* x = b.input("x", {2, 6, 3, 2});
    Value* scale = b.constant("scale", Tensor::from_vector<float>({3}, {1.0f, -2.0f, 0.5f}));
    Value* bias = b.input("bias", {3});  // a run-time bias takes the Expand path
    b.node("GroupNormalization", {x, scale, bias}, {"y"},
           {Attribute::make_int("num_groups", 3), Attribute::make_float("epsilon", 1e-3f)});
    b.output("y");
    upgrade_and_compare(b);
  }
}

TEST_CASE("opset upgrade: GroupNormalization scale and bias become per channel") {
  // Constant scale and bias with a static channel count: new per-channel initializers.
  ModelBuilder b(18);
  Value* x = b.input("x", {1, 6, 2, 2});
  Value* scale = b.constant("scale", Tensor::from_vector<float>({3}, {1.0f, 2.0f, 3.0f}));
  Value* bias = b.constant("bias", Tensor::from_vector<float>({3}, {-1.0f, 0.0f, 1.0f}));
  b.node("GroupNormalization", {x, scale, bias}, {"y"}, {Attribute::make_int("num_groups", 3)});
  b.output("y");
  REQUIRE(upgrade_opset(b.model, 21).is_ok());
  const Node* n = only_node(b.model, "GroupNormalization");
  const Tensor* s = b.model.graph->initializer(n->input(1));
  const Tensor* c = b.model.graph->initializer(n->input(2));
  REQUIRE(s != nullptr);
  REQUIRE(c != nullptr);
  CHECK(s->to_doubles() == std::vector<double>{1, 1, 2, 2, 3, 3});
  CHECK(c->to_doubles() == std::vector<double>{-1, -1, 0, 0, 1, 1});
  CHECK(b.model.graph->initializer(b.model.graph->find_value("scale"))->numel() == 3);  // the original stays
  CHECK(n->find_attribute("stash_type") == nullptr);

  // Scale computed at run time and channels unknown: Shape/Div/Concat/Unsqueeze/Expand/Reshape.
  ModelBuilder dyn(18);
  Value* dx = dyn.input("x", {1, 6, 2, 2});
  dx->type->shape = std::vector<Dim>{d(1), test::sym("C"), d(2), d(2)};
  Value* ds = dyn.input("scale", {3});
  Value* db = dyn.constant("bias", Tensor::from_vector<float>({3}, {-1.0f, 0.0f, 1.0f}));
  dyn.node("GroupNormalization", {dx, ds, db}, {"y"}, {Attribute::make_int("num_groups", 3)});
  dyn.output("y");
  dyn.g.find_value("y")->type = float_type({d(1), test::sym("C"), d(2), d(2)});
  REQUIRE(opset_upgrade_blockers(dyn.model, 21).empty());
  REQUIRE(upgrade_opset(dyn.model, 21).is_ok());
  std::multiset<std::string> ops;
  for (const auto& node : dyn.model.graph->nodes()) ops.insert(node->op_type());
  CHECK(ops == std::multiset<std::string>{"Shape", "Div", "Concat", "Unsqueeze", "Expand", "Reshape", "Unsqueeze",
                                          "Expand", "Reshape", "GroupNormalization"});
  CHECK(dyn.model.graph->nodes().back()->op_type() == "GroupNormalization");  // execution order
  REQUIRE(dyn.model.graph->validate().is_ok());
  // The per-channel expansion itself, run by the interpreter: [1, 2, 3] over 6 channels.
  Model expansion = round_trip(dyn.model);
  const Node* gn = only_node(expansion, "GroupNormalization");
  expansion.graph->outputs = {gn->input(1)};
  expansion.graph->remove_node(const_cast<Node*>(gn));
  const auto out = run(expansion, {{"x", dyn.feeds.at("x")}, {"scale", Tensor::from_vector<float>({3}, {1, 2, 3})}});
  CHECK(out.begin()->second.to_doubles() == std::vector<double>{1, 1, 2, 2, 3, 3});

  // Groups that do not divide the channels are refused, naming the node.
  ModelBuilder bad(18);
  Value* bx = bad.input("x", {1, 5, 2, 2});
  bad.node("GroupNormalization", {bx, scale = bad.constant("scale", Tensor::from_vector<float>({2}, {1, 2})),
                                  bad.constant("bias", Tensor::from_vector<float>({2}, {1, 2}))},
           {"y"}, {Attribute::make_int("num_groups", 2)});
  const auto blockers = opset_upgrade_blockers(bad.model, 21);
  REQUIRE(blockers.size() == 1);
  CHECK(blockers[0] == "GroupNormalization 'GroupNormalization_node' (changed at opset 21: scale and bias per channel "
                       "instead of per group; stash_type attribute): 5 channels do not split into 2 groups");
}

TEST_CASE("opset upgrade: nodes in subgraphs are adapted too") {
  ModelBuilder b(13);
  Value* x = b.input("x", {2, 3});
  Value* cond = b.constant("cond", Tensor::from_vector<bool>({}, {true}));
  auto branch = [&](const std::string& out, const std::vector<int64_t>& axes) {
    auto g = std::make_shared<Graph>();
    g->name = out + "_branch";
    Value* o = g->get_or_create_value(out);
    g->add_node("ReduceMean", {g->get_or_create_value("x")}, {o}, out + "_mean")
        ->set_attribute(Attribute::make_ints("axes", axes));
    g->outputs.push_back(o);
    return g;
  };
  Node* n = b.node("If", {cond}, {"y"});
  Attribute then_branch;
  then_branch.name = "then_branch";
  then_branch.type = AttributeType::Graph;
  then_branch.g = branch("t", {1});
  Attribute else_branch = then_branch;
  else_branch.name = "else_branch";
  else_branch.g = branch("e", {0});
  n->set_attribute(then_branch);
  n->set_attribute(else_branch);
  b.output("y");
  (void)x;
  // qflow's interpreter has no If kernel: the rewrite is checked by structure.
  REQUIRE(upgrade_opset(b.model, 21).is_ok());
  for (const char* name : {"then_branch", "else_branch"}) {
    const Graph& sub = *b.model.graph->nodes().front()->find_attribute(name)->g;
    const Node* reduce = only_node_in(sub, "ReduceMean");
    CHECK(reduce->find_attribute("axes") == nullptr);
    REQUIRE(reduce->inputs().size() == 2);
    REQUIRE(sub.initializer(reduce->input(1)) != nullptr);
    CHECK(sub.initializer(reduce->input(1))->to_int64s() ==
          std::vector<int64_t>{std::string(name) == "then_branch" ? 1 : 0});
  }
  CHECK(b.model.graph->initializer_order().size() == 1);  // only cond: constants live in their subgraph
}

TEST_CASE("opset upgrade: versions outside 13..21 are refused, a model at the target is left alone") {
  ModelBuilder old(12);
  Value* x = old.input("x", {2, 3});
  old.node("ReduceMean", {x}, {"y"}, {Attribute::make_ints("axes", {1})});
  Status status = upgrade_opset(old.model, 21);
  CHECK(status.code() == StatusCode::Unsupported);
  CHECK(status.message() ==
        "cannot raise the default-domain opset 12: qflow's adapters start at opset 13 (import with min-opset = 13 first)");
  CHECK(old.model.opset("") == 12);

  ModelBuilder b(13);
  b.node("ReduceMean", {b.input("x", {2, 3})}, {"y"}, {Attribute::make_ints("axes", {1})});
  status = upgrade_opset(b.model, 22);
  CHECK(status.message() == "cannot raise the default-domain opset to 22: qflow adapts ops up to opset 21");
  CHECK(upgrade_opset(b.model, 13).is_ok());
  CHECK(only_node(b.model, "ReduceMean")->find_attribute("axes") != nullptr);
  // Step by step: 13 -> 17 crosses no Reduce change, 17 -> 21 does.
  REQUIRE(upgrade_opset(b.model, 17).is_ok());
  CHECK(only_node(b.model, "ReduceMean")->find_attribute("axes") != nullptr);
  REQUIRE(upgrade_opset(b.model, 21).is_ok());
  CHECK(only_node(b.model, "ReduceMean")->find_attribute("axes") == nullptr);
}

TEST_CASE("opset upgrade: libonnx's checker and shape inference read the raised forms") {
  ModelBuilder b(13);
  Value* x = b.input("x", {2, 3, 4});
  b.node("ReduceMean", {x}, {"m"}, {Attribute::make_ints("axes", {1}), Attribute::make_int("keepdims", 0)});
  b.node("Split", {b.g.find_value("m")}, {"s0", "s1"}, {Attribute::make_int("axis", 1)});
  b.node("Identity", {b.g.find_value("s0")}, {"o0"});
  b.node("Identity", {b.g.find_value("s1")}, {"o1"});
  b.output("o0");
  b.output("o1");
  b.g.find_value("o0")->type = float_type({d(2), d(2)});
  b.g.find_value("o1")->type = float_type({d(2), d(2)});
  REQUIRE(upgrade_opset(b.model, 21).is_ok());
  const Status checked = check_model(b.model);
  CHECK_MESSAGE(checked.is_ok(), checked.message());
  REQUIRE(infer_shapes(b.model).is_ok());
  const Value* m = b.model.graph->find_value("m");
  REQUIRE(m->type.has_value());
  REQUIRE(m->type->shape.has_value());
  CHECK(*m->type->shape == std::vector<Dim>{d(2), d(4)});
  CHECK((*b.model.graph->find_value("s1")->type->shape) == std::vector<Dim>{d(2), d(2)});
}

}  // namespace qflow
