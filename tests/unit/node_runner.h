// Test helper: runs one node through the Executor, for kernel unit tests.
#pragma once

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "framework/interpreter/executor.h"
#include "qflow/ir/graph.h"

namespace qflow::testing {

struct SingleNode {
  std::string op_type;
  std::vector<Tensor> inputs;          // empty Tensor() = missing optional input
  std::vector<bool> constant_inputs;   // true: bind input i as an initializer
  std::vector<Attribute> attributes;
  int64_t opset = 17;
  int outputs = 1;
  std::string domain;
  int threads = 1;
};

// Builds a one-node model and runs it; returns outputs in node order.
inline Expected<std::vector<Tensor>> run_single_node(const SingleNode& spec) {
  Model model;
  model.opset_imports.push_back({"", spec.opset});
  if (!spec.domain.empty()) model.opset_imports.push_back({spec.domain, 1});
  Graph& g = *model.graph;
  std::vector<Value*> ins;
  std::map<std::string, Tensor> feeds;
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    if (spec.inputs[i].empty()) {
      ins.push_back(nullptr);
      continue;
    }
    Value* v = g.get_or_create_value("in" + std::to_string(i));
    ins.push_back(v);
    if (i < spec.constant_inputs.size() && spec.constant_inputs[i]) {
      g.set_initializer(v, spec.inputs[i]);
    } else {
      g.inputs.push_back(v);
      feeds[v->name()] = spec.inputs[i];
    }
  }
  std::vector<Value*> outs;
  for (int i = 0; i < spec.outputs; ++i) outs.push_back(g.get_or_create_value("out" + std::to_string(i)));
  Node* node = g.add_node(spec.op_type, ins, outs, "node", spec.domain);
  for (const Attribute& a : spec.attributes) node->set_attribute(a);
  g.outputs = outs;
  ExecutorOptions options;
  options.threads = spec.threads;
  auto executor = Executor::create(model, options);
  if (!executor) return executor.status();
  auto results = (*executor)->run(feeds);
  if (!results) return results.status();
  std::vector<Tensor> out;
  for (Value* v : outs) out.push_back(results->at(v->name()));
  return out;
}

// A spec set field by field, so partial specs stay free of missing-initializer warnings.
inline SingleNode single_node(std::string op, std::vector<Tensor> inputs, std::vector<Attribute> attributes = {},
                              int64_t opset = 17) {
  SingleNode spec;
  spec.op_type = std::move(op);
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attributes);
  spec.opset = opset;
  return spec;
}

// Runs the spec and returns its first output; a failure stops the test with its message.
inline Tensor run_first_output(const SingleNode& spec) {
  auto out = run_single_node(spec);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return out->at(0);
}

}  // namespace qflow::testing
