// Tests of the first-order BPU cost: MACs per op from declared shapes and the compute-bound time.
#include <doctest/doctest.h>

#include "plugins/backends/bpu/bpu_cost.h"
#include "test_bpu_helpers.h"

namespace qflow {
namespace {

using namespace bpu_test;

TEST_CASE("bpu cost: MACs of Conv, ConvTranspose, Gemm and MatMul; none for other ops") {
  Graph g;
  Value* x = g.get_or_create_value("x");
  set_shape(x, {1, 3, 4, 4});
  g.inputs = {x};
  Value* c = conv(g, "c", x, {8, 3, 3, 3});
  ValueType symbolic;  // batch "N" counts as 1
  symbolic.shape = std::vector<Dim>{Dim{std::nullopt, "N", ""}, Dim{8, "", ""}, Dim{4, "", ""}, Dim{4, "", ""}};
  c->type = symbolic;
  Value* wt = g.get_or_create_value("t_W");
  g.set_initializer(wt, Tensor(DType::Float32, {8, 2, 2, 2}));
  Value* t = g.get_or_create_value("t_out");
  g.add_node("ConvTranspose", {c, wt}, {t}, "t");
  Value* a = g.get_or_create_value("a");
  set_shape(a, {2, 16});
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, Tensor(DType::Float32, {16, 4}));
  Value* y = g.get_or_create_value("y");
  set_shape(y, {2, 4});
  g.add_node("MatMul", {a, w}, {y}, "mm");
  Value* r = unary(g, "Relu", "r", y);
  Value* u = g.get_or_create_value("u_out");
  g.add_node("Gemm", {r, w}, {u}, "gemm");  // r has no declared shape

  std::map<std::string, std::optional<int64_t>> macs;
  for (const auto& node : g.nodes()) macs[node->name()] = node_macs(g, *node);
  CHECK(macs["c"] == 8 * 4 * 4 * 3 * 3 * 3);  // output elements x C x kernel
  CHECK(macs["t"] == 8 * 4 * 4 * 2 * 2 * 2);  // input elements x M/group x kernel
  CHECK(macs["mm"] == 2 * 4 * 16);            // output elements x K
  CHECK(macs["r"] == 0);
  CHECK_FALSE(macs["gemm"].has_value());

  BpuCost cost;
  cost.macs_per_cycle = 2500;
  cost.frequency_mhz = 1000;
  cost.bandwidth_gbps = 12.8;
  CHECK(compute_milliseconds(cost, 2'500'000'000) == doctest::Approx(1.0));
  CHECK(compute_milliseconds(platform("nash").cost, 40'000'000'000) == doctest::Approx(1.0));
}

}  // namespace
}  // namespace qflow
