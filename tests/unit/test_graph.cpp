// IR graph utilities: def-use maintenance, topological order, cycle and dangling detection.
#include <doctest/doctest.h>

#include <vector>

#include "qflow/ir/graph.h"

using namespace qflow;

namespace {
// a -> Relu(r1) -> Neg(n1) -> out, with a second use of r1's output by Add.
struct Chain {
  Graph g;
  Value *a, *r, *n, *s;
  Node *relu, *neg, *add;
  Chain() {
    a = g.get_or_create_value("a");
    r = g.get_or_create_value("r");
    n = g.get_or_create_value("n");
    s = g.get_or_create_value("s");
    g.inputs = {a};
    add = g.add_node("Add", {n, r}, {s}, "add");  // inserted first on purpose
    relu = g.add_node("Relu", {a}, {r}, "relu");
    neg = g.add_node("Neg", {r}, {n}, "neg");
    g.outputs = {s};
  }
};
}  // namespace

TEST_CASE("def-use links follow edits") {
  Chain c;
  CHECK(c.r->producer() == c.relu);
  CHECK(c.r->uses().size() == 2);
  c.g.replace_all_uses(c.r, c.a);
  CHECK(c.r->uses().empty());
  CHECK(c.a->uses().size() == 3);
  CHECK(c.add->input(1) == c.a);
  c.g.remove_node(c.relu);
  CHECK(c.r->producer() == nullptr);
  CHECK(c.g.node_count() == 2);
  c.g.prune_unused_values();
  CHECK(c.g.find_value("r") == nullptr);
  CHECK(c.g.validate().is_ok());
}

TEST_CASE("topological order is dependency-respecting and stable") {
  Chain c;
  auto order = c.g.topological_order();
  REQUIRE(order.has_value());
  REQUIRE(order->size() == 3);
  CHECK((*order)[0] == c.relu);
  CHECK((*order)[1] == c.neg);
  CHECK((*order)[2] == c.add);
}

TEST_CASE("move_nodes_to_end puts the listed nodes last, in the listed order") {
  Chain c;
  Chain other;  // a node of another graph is skipped
  c.g.move_nodes_to_end({c.neg, other.relu, c.add});
  std::vector<const Node*> listed;
  for (const auto& n : c.g.nodes()) listed.push_back(n.get());
  CHECK(listed == std::vector<const Node*>{c.relu, c.neg, c.add});
  c.g.move_nodes_to_end({c.relu});
  listed.clear();
  for (const auto& n : c.g.nodes()) listed.push_back(n.get());
  CHECK(listed == std::vector<const Node*>{c.neg, c.add, c.relu});
}

TEST_CASE("a cycle is reported with the nodes on it") {
  Chain c;
  c.relu->set_input(0, c.n);  // relu <- neg <- relu
  auto order = c.g.topological_order();
  REQUIRE_FALSE(order.has_value());
  const std::string message = order.status().message();
  CHECK(message.find("cycle") != std::string::npos);
  CHECK(message.find("Relu 'relu'") != std::string::npos);
  CHECK(message.find("Neg 'neg'") != std::string::npos);
  CHECK(message.find("Add") == std::string::npos);
}

TEST_CASE("validate names a dangling input") {
  Chain c;
  Value* ghost = c.g.get_or_create_value("ghost");
  c.neg->set_input(0, ghost);
  Status s = c.g.validate();
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "input 'ghost' of Neg 'neg' is not produced by any node, nor a graph input or initializer");
}

TEST_CASE("validate refuses two producers of one value") {
  Chain c;
  c.g.add_node("Relu", {c.a}, {c.n}, "second");
  Status s = c.g.validate();
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "value 'n' is produced by both Neg 'neg' and Relu 'second'");
}

TEST_CASE("initializers keep insertion order and can be removed") {
  Graph g;
  Value* w = g.get_or_create_value("w");
  Value* b = g.get_or_create_value("b");
  g.set_initializer(w, Tensor::from_vector<float>({2}, {1, 2}));
  g.set_initializer(b, Tensor::scalar<float>(3));
  REQUIRE(g.initializer_order().size() == 2);
  CHECK(g.initializer_order()[0] == w);
  CHECK(g.initializer(b)->data<float>()[0] == 3.0f);
  g.remove_initializer(w);
  CHECK_FALSE(g.is_initializer(w));
  CHECK(g.initializer_order().size() == 1);
}

TEST_CASE("a copied graph is edited independently and shares initializer storage") {
  Chain c;
  Value* w = c.g.get_or_create_value("w");
  c.g.set_initializer(w, Tensor::from_vector<float>({2}, {1, 2}));
  c.add->set_input(2, w);
  auto body = std::make_shared<Graph>();
  Value* x = body->get_or_create_value("x");
  body->outputs = {x};
  body->add_node("Identity", {c.g.get_or_create_value("a")}, {x}, "inner");
  c.neg->set_attribute(Attribute::make_graph("body", body));
  c.a->type = ValueType{DType::Float32, std::vector<Dim>{Dim{4, "", ""}}, "", ""};

  std::shared_ptr<Graph> copy = c.g.copy();
  REQUIRE(copy->validate().is_ok());
  CHECK(copy->node_count() == 3);
  Value* ca = copy->find_value("a");
  REQUIRE(ca != nullptr);
  CHECK(ca != c.a);
  CHECK(ca->type == c.a->type);
  CHECK(ca->uses().size() == 1);
  CHECK(copy->inputs == std::vector<Value*>{ca});
  CHECK(copy->outputs == std::vector<Value*>{copy->find_value("s")});
  // Insertion order kept: the Add that was added first is still first.
  CHECK(copy->nodes().front()->op_type() == "Add");
  CHECK(copy->initializer(copy->find_value("w"))->data<float>() == c.g.initializer(w)->data<float>());
  CHECK(c.g.initializer(w)->use_count() == 2);
  // Subgraphs are copies too.
  const Node* neg = nullptr;
  for (const auto& n : copy->nodes())
    if (n->name() == "neg") neg = n.get();
  REQUIRE(neg != nullptr);
  REQUIRE(neg->find_attribute("body") != nullptr);
  CHECK(neg->find_attribute("body")->g != body);
  CHECK(neg->find_attribute("body")->g->node_count() == 1);

  copy->remove_node(const_cast<Node*>(neg));
  copy->remove_initializer(copy->find_value("w"));
  CHECK(c.g.node_count() == 3);
  CHECK(c.g.is_initializer(w));
  CHECK(c.r->uses().size() == 2);
}
