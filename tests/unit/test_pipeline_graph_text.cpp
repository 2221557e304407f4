// Unit tests for the graph text that `qflow run --print-after` prints.
#include <doctest/doctest.h>

#include <string>

#include "framework/pipeline/graph_text.h"

namespace qflow {

TEST_CASE("graph text: nodes in execution order with inputs, outputs and attributes") {
  Graph graph;
  graph.name = "net";
  Value* x = graph.get_or_create_value("x");
  Value* w = graph.get_or_create_value("w");
  Value* c = graph.get_or_create_value("c");
  Value* y = graph.get_or_create_value("y");
  graph.inputs = {x};
  graph.outputs = {y};
  graph.set_initializer(w, Tensor::from_vector<float>({2, 1, 1, 1}, {1.0f, 2.0f}));
  // Added out of order: the text must follow the data flow, not insertion.
  graph.add_node("Relu", {c}, {y}, "act");
  Node* conv = graph.add_node("Conv", {x, w, nullptr}, {c}, "conv");
  conv->set_attribute(Attribute::make_ints("pads", {0, 0, 0, 0}));
  conv->set_attribute(Attribute::make_int("group", 1));
  conv->set_attribute(Attribute::make_string("auto_pad", "NOTSET"));
  Node* custom = graph.add_node("Mark", {y}, {graph.get_or_create_value("m")}, "", "com.example");
  custom->set_attribute(Attribute::make_floats("v", {0.5f, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  custom->set_attribute(Attribute::make_tensor("t", Tensor::from_vector<float>({3}, {1, 2, 3})));
  CHECK(graph_text(graph) ==
        "graph net (3 nodes)\n"
        "  inputs: x\n"
        "  conv: Conv(x, w, \"\") -> c {pads=[0, 0, 0, 0], group=1, auto_pad=\"NOTSET\"}\n"
        "  act: Relu(c) -> y\n"
        "  <unnamed>: com.example::Mark(y) -> m {v=[0.5, 1, 2, 3, 4, 5, 6, 7, +2], t=tensor<float [3]>}\n"
        "  outputs: y\n"
        "  initializers: 1\n");
}

TEST_CASE("graph text: a graph with a cycle still prints, in insertion order") {
  Graph graph;
  Value* a = graph.get_or_create_value("a");
  Value* b = graph.get_or_create_value("b");
  graph.add_node("Neg", {b}, {a}, "n1");
  graph.add_node("Neg", {a}, {b}, "n2");
  CHECK(graph_text(graph) ==
        "graph <unnamed> (2 nodes)\n"
        "  inputs: \n"
        "  n1: Neg(b) -> a\n"
        "  n2: Neg(a) -> b\n"
        "  outputs: \n"
        "  initializers: 0\n");
}

}  // namespace qflow
