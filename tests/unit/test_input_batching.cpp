// `qflow infer` batching: arrays of the declared shape are fed as is, stacks run a batch at a time.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "framework/cli/input_batching.h"

using namespace qflow;
using namespace qflow::cli;

namespace {

// A graph input named `name` declared as float with `dims` (-1: symbolic "N"); no dims: no shape.
Value* declared(Graph& graph, const std::string& name, const std::vector<int64_t>& dims, bool has_shape = true) {
  Value* v = graph.get_or_create_value(name);
  ValueType type;
  type.dtype = DType::Float32;
  if (has_shape) {
    std::vector<Dim> shape;
    for (int64_t d : dims) {
      Dim dim;
      if (d >= 0) dim.value = d;
      else dim.param = "N";
      shape.push_back(dim);
    }
    type.shape = shape;
  }
  v->type = type;
  return v;
}

Tensor array(const Shape& shape, DType dtype = DType::Float32) { return Tensor(dtype, shape); }

}  // namespace

TEST_CASE("arrays of their inputs' declared shapes are fed as is whatever their first dimensions") {
  Graph graph;
  const Value* x = declared(graph, "x", {1, 4});
  const Value* state = declared(graph, "state", {2, 1, 8});
  auto px = plan_input_batching(*x, array({1, 4}), "x.npy", false);
  auto ps = plan_input_batching(*state, array({2, 1, 8}), "state.npy", false);
  REQUIRE(px);
  REQUIRE(ps);
  CHECK_FALSE(px->batched);
  CHECK_FALSE(ps->batched);
  auto run = plan_run_batches({*px, *ps}, {"x.npy", "state.npy"}, 0);
  REQUIRE(run);
  CHECK(run->samples == 0);
  CHECK(run->chunk == 0);
}

TEST_CASE("a stack of fixed-size batches runs a batch at a time beside an input fed whole") {
  Graph graph;
  const Value* x = declared(graph, "x", {1, 4});
  const Value* sr = declared(graph, "sr", {1});
  auto px = plan_input_batching(*x, array({5, 4}), "x.npy", false);
  auto ps = plan_input_batching(*sr, array({1}), "sr.npy", false);
  REQUIRE(px);
  REQUIRE(ps);
  CHECK(px->batched);
  CHECK(px->samples == 5);
  CHECK(px->fixed_chunk == 1);
  CHECK_FALSE(ps->batched);
  auto run = plan_run_batches({*px, *ps}, {"x.npy", "sr.npy"}, 0);
  REQUIRE(run);
  CHECK(run->samples == 5);
  CHECK(run->chunk == 1);
  // B = 2 and 6 rows: three runs of two.
  const Value* pair = declared(graph, "pair", {2, 3});
  auto pp = plan_input_batching(*pair, array({6, 3}), "pair.npy", false);
  REQUIRE(pp);
  CHECK(pp->fixed_chunk == 2);
  CHECK(pp->samples == 6);
  // Not a multiple of B: refused, naming the stacked form.
  auto odd = plan_input_batching(*pair, array({5, 3}), "odd.npy", false);
  REQUIRE_FALSE(odd);
  CHECK(odd.status().message().find("(or such arrays stacked along the first axis)") != std::string::npos);
}

TEST_CASE("symbolic first dimensions are split only when a batch size asks for it") {
  Graph graph;
  const Value* a = declared(graph, "a", {-1, 2});
  const Value* b = declared(graph, "b", {-1, 2});
  auto whole_a = plan_input_batching(*a, array({3, 2}), "a.npy", false);
  auto whole_b = plan_input_batching(*b, array({2, 2}), "b.npy", false);
  REQUIRE(whole_a);
  REQUIRE(whole_b);
  CHECK_FALSE(whole_a->batched);
  auto whole = plan_run_batches({*whole_a, *whole_b}, {"a.npy", "b.npy"}, 0);
  REQUIRE(whole);
  CHECK(whole->chunk == 0);

  auto split_a = plan_input_batching(*a, array({3, 2}), "a.npy", true);
  auto split_b = plan_input_batching(*b, array({2, 2}), "b.npy", true);
  REQUIRE(split_a);
  REQUIRE(split_b);
  CHECK(split_a->batched);
  CHECK(split_a->samples == 3);
  auto mismatch = plan_run_batches({*split_a, *split_b}, {"a.npy", "b.npy"}, 2);
  REQUIRE_FALSE(mismatch);
  CHECK(mismatch.status().message() == "inputs hold different numbers of samples: a.npy has 3, b.npy has 2");

  auto split_b3 = plan_input_batching(*b, array({3, 2}), "b.npy", true);
  REQUIRE(split_b3);
  auto runs = plan_run_batches({*split_a, *split_b3}, {"a.npy", "b.npy"}, 2);
  REQUIRE(runs);
  CHECK(runs->samples == 3);
  CHECK(runs->chunk == 2);
  // A batch size covering every sample is one run.
  auto one = plan_run_batches({*split_a, *split_b3}, {"a.npy", "b.npy"}, 8);
  REQUIRE(one);
  CHECK(one->chunk == 0);
}

TEST_CASE("scalars, undeclared shapes and wrong arrays") {
  Graph graph;
  const Value* scalar = declared(graph, "s", {});
  const Value* unknown = declared(graph, "u", {}, false);
  const Value* x = declared(graph, "x", {-1, 3});
  auto ps = plan_input_batching(*scalar, array({}), "s.npy", true);
  auto pu = plan_input_batching(*unknown, array({7, 2}), "u.npy", true);
  REQUIRE(ps);
  REQUIRE(pu);
  CHECK_FALSE(ps->batched);
  CHECK_FALSE(pu->batched);
  auto wrong_dtype = plan_input_batching(*x, array({4, 3}, DType::Float64), "x.npy", false);
  REQUIRE_FALSE(wrong_dtype);
  CHECK(wrong_dtype.status().message() == "x.npy: input 'x' expects float [N, 3], the file holds double [4, 3]");
  auto wrong_shape = plan_input_batching(*x, array({4, 5}), "x.npy", false);
  REQUIRE_FALSE(wrong_shape);
  CHECK(wrong_shape.status().message() == "x.npy: input 'x' expects float [N, 3], the file holds float [4, 5]");
  // No input at all (a model without inputs): one run.
  auto none = plan_run_batches({}, {}, 4);
  REQUIRE(none);
  CHECK(none->chunk == 0);
  // Fixed batch sizes that disagree cannot share runs.
  const Value* p = declared(graph, "p", {2, 3});
  const Value* q = declared(graph, "q", {3, 3});
  auto pp = plan_input_batching(*p, array({6, 3}), "p.npy", false);
  auto pq = plan_input_batching(*q, array({6, 3}), "q.npy", false);
  REQUIRE(pp);
  REQUIRE(pq);
  CHECK_FALSE(plan_run_batches({*pp, *pq}, {"p.npy", "q.npy"}, 0));
}

TEST_CASE("rows sliced and joined again give the array back") {
  Tensor t(DType::Float32, {5, 2});
  for (int64_t i = 0; i < 10; ++i) t.data<float>()[i] = static_cast<float>(i);
  std::vector<Tensor> parts{slice_rows(t, 0, 2), slice_rows(t, 2, 2), slice_rows(t, 4, 1)};
  CHECK(parts[2].shape() == Shape{1, 2});
  CHECK(parts[1].data<float>()[0] == 4.0f);
  auto joined = concat_rows("y", parts);
  REQUIRE(joined);
  REQUIRE(joined->shape() == Shape{5, 2});
  for (int64_t i = 0; i < 10; ++i) CHECK(joined->data<float>()[i] == static_cast<float>(i));
  auto bad = concat_rows("y", {Tensor(DType::Float32, {1, 2}), Tensor(DType::Float32, {1, 3})});
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message().find("output 'y' cannot be concatenated") != std::string::npos);
}
