// Unit tests for the shape and data-movement kernels, with hand-computed expectations.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/node_runner.h"

namespace qflow {
namespace {

using testing::SingleNode;
using testing::run_single_node;

Tensor f32(Shape shape, std::vector<float> values) { return Tensor::from_vector<float>(std::move(shape), values); }
Tensor i64(Shape shape, std::vector<int64_t> values) { return Tensor::from_vector<int64_t>(std::move(shape), values); }
Tensor iota(Shape shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return f32(std::move(shape), v);
}

Expected<std::vector<Tensor>> try_run(const std::string& op, std::vector<Tensor> inputs,
                                      std::vector<Attribute> attributes = {}, int64_t opset = 17, int outputs = 1) {
  SingleNode spec;
  spec.op_type = op;
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attributes);
  spec.opset = opset;
  spec.outputs = outputs;
  return run_single_node(spec);
}

std::vector<Tensor> run(const std::string& op, std::vector<Tensor> inputs, std::vector<Attribute> attributes = {},
                        int64_t opset = 17, int outputs = 1) {
  auto out = try_run(op, std::move(inputs), std::move(attributes), opset, outputs);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return *out;
}

std::vector<float> floats(const Tensor& t) {
  REQUIRE(t.dtype() == DType::Float32);
  return {t.data<float>(), t.data<float>() + t.numel()};
}

}  // namespace

TEST_CASE("Concat joins along a negative axis") {
  auto out = run("Concat", {iota({2, 2}), f32({2, 1}, {10, 11})}, {Attribute::make_int("axis", -1)});
  CHECK(out[0].shape() == Shape{2, 3});
  CHECK(floats(out[0]) == std::vector<float>{0, 1, 10, 2, 3, 11});
}

TEST_CASE("Split: equal parts, attribute sizes before opset 13 and input sizes after") {
  auto equal = run("Split", {iota({6})}, {}, 17, 3);
  CHECK(floats(equal[2]) == std::vector<float>{4, 5});
  auto attr = run("Split", {iota({2, 3})}, {Attribute::make_int("axis", 1), Attribute::make_ints("split", {1, 2})}, 11, 2);
  CHECK(attr[0].shape() == Shape{2, 1});
  CHECK(floats(attr[1]) == std::vector<float>{1, 2, 4, 5});
  auto input = run("Split", {iota({5}), i64({3}, {2, 0, 3})}, {}, 13, 3);
  CHECK(input[1].numel() == 0);
  CHECK(floats(input[2]) == std::vector<float>{2, 3, 4});
  CHECK_FALSE(try_run("Split", {iota({5})}, {}, 13, 2).has_value());
}

TEST_CASE("Slice: attributes at opset 9, negative steps and clamping at opset 10+") {
  auto v9 = run("Slice", {iota({3, 4})}, {Attribute::make_ints("starts", {1, -3}), Attribute::make_ints("ends", {1000, -1})}, 9);
  CHECK(v9[0].shape() == Shape{2, 2});
  CHECK(floats(v9[0]) == std::vector<float>{5, 6, 9, 10});
  // Reverse the last axis from the end, stepping by -2; the start is clamped.
  auto neg = run("Slice", {iota({2, 5}), i64({1}, {100}), i64({1}, {-100}), i64({1}, {-1}), i64({1}, {-2})});
  CHECK(neg[0].shape() == Shape{2, 3});
  CHECK(floats(neg[0]) == std::vector<float>{4, 2, 0, 9, 7, 5});
  auto empty = run("Slice", {iota({4}), i64({1}, {3}), i64({1}, {1})});
  CHECK(empty[0].numel() == 0);
}

TEST_CASE("Reshape: 0 copies a dimension, -1 infers, allowzero keeps 0, opset 1 attribute") {
  auto out = run("Reshape", {iota({2, 3, 4}), i64({3}, {0, -1, 2})});
  CHECK(out[0].shape() == Shape{2, 6, 2});
  CHECK(floats(out[0])[23] == 23.0f);
  auto zero = run("Reshape", {Tensor(DType::Float32, {0, 3}), i64({2}, {3, 0})}, {Attribute::make_int("allowzero", 1)}, 14);
  CHECK(zero[0].shape() == Shape{3, 0});
  auto old = run("Reshape", {iota({6})}, {Attribute::make_ints("shape", {3, -1})}, 1);
  CHECK(old[0].shape() == Shape{3, 2});
  CHECK_FALSE(try_run("Reshape", {iota({6}), i64({2}, {4, -1})}).has_value());
}

TEST_CASE("Flatten with negative axis and axis 0") {
  auto out = run("Flatten", {iota({2, 3, 4})}, {Attribute::make_int("axis", -1)});
  CHECK(out[0].shape() == Shape{6, 4});
  auto zero = run("Flatten", {iota({2, 3})}, {Attribute::make_int("axis", 0)});
  CHECK(zero[0].shape() == Shape{1, 6});
}

TEST_CASE("Transpose default and explicit permutations") {
  auto rev = run("Transpose", {iota({2, 3})});
  CHECK(rev[0].shape() == Shape{3, 2});
  CHECK(floats(rev[0]) == std::vector<float>{0, 3, 1, 4, 2, 5});
  auto perm = run("Transpose", {iota({2, 3, 2})}, {Attribute::make_ints("perm", {1, 0, 2})});
  CHECK(floats(perm[0]) == std::vector<float>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11});
}

TEST_CASE("Transpose of larger tensors matches the index definition for every permutation") {
  const Shape shape{3, 37, 41};
  const Tensor in = iota(shape);
  const std::vector<std::vector<int64_t>> perms = {{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& perm : perms) {
    auto out = run("Transpose", {in}, {Attribute::make_ints("perm", perm)}, 17, 1);
    const Shape& os = out[0].shape();
    REQUIRE(os == Shape{shape[perm[0]], shape[perm[1]], shape[perm[2]]});
    const float* o = out[0].data<float>();
    bool all_match = true;
    for (int64_t a = 0; a < os[0]; ++a)
      for (int64_t b = 0; b < os[1]; ++b)
        for (int64_t c = 0; c < os[2]; ++c) {
          int64_t idx[3];
          idx[perm[0]] = a;
          idx[perm[1]] = b;
          idx[perm[2]] = c;
          const float expected = static_cast<float>((idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]);
          if (o[(a * os[1] + b) * os[2] + c] != expected) all_match = false;
        }
    CHECK_MESSAGE(all_match, "perm " << perm[0] << perm[1] << perm[2]);
  }
}

TEST_CASE("Transpose and Pad give the same bytes on two threads") {
  SingleNode spec;
  spec.op_type = "Transpose";
  spec.inputs = {iota({4, 33, 29})};
  spec.attributes = {Attribute::make_ints("perm", {2, 0, 1})};
  auto one = run_single_node(spec);
  spec.threads = 2;
  auto two = run_single_node(spec);
  REQUIRE((one.has_value() && two.has_value()));
  CHECK((*one)[0].bitwise_equal((*two)[0]));
  spec.op_type = "Pad";
  spec.inputs = {iota({4, 33, 29}), i64({6}, {1, 2, 3, 0, -1, 2})};
  spec.attributes = {Attribute::make_string("mode", "reflect")};
  auto pad_two = run_single_node(spec);
  spec.threads = 1;
  auto pad_one = run_single_node(spec);
  REQUIRE((pad_one.has_value() && pad_two.has_value()));
  CHECK((*pad_one)[0].shape() == Shape{5, 34, 34});
  CHECK((*pad_one)[0].bitwise_equal((*pad_two)[0]));
}

TEST_CASE("Squeeze and Unsqueeze: attribute axes before 13, input axes after, negative axes") {
  auto sq = run("Squeeze", {iota({1, 3, 1})}, {Attribute::make_ints("axes", {-1})}, 11);
  CHECK(sq[0].shape() == Shape{1, 3});
  auto all = run("Squeeze", {iota({1, 3, 1})});
  CHECK(all[0].shape() == Shape{3});
  auto un = run("Unsqueeze", {iota({3, 4}), i64({2}, {-1, 0})});
  CHECK(un[0].shape() == Shape{1, 3, 4, 1});
  auto un11 = run("Unsqueeze", {iota({3})}, {Attribute::make_ints("axes", {1})}, 11);
  CHECK(un11[0].shape() == Shape{3, 1});
  CHECK_FALSE(try_run("Squeeze", {iota({2, 3}), i64({1}, {0})}).has_value());
}

TEST_CASE("Shape with start/end and Size") {
  auto s = run("Shape", {iota({2, 3, 4})}, {Attribute::make_int("start", -2)}, 15);
  CHECK(s[0].to_int64s() == std::vector<int64_t>{3, 4});
  auto size = run("Size", {iota({2, 3, 4})});
  CHECK(size[0].rank() == 0);
  CHECK(size[0].to_int64s() == std::vector<int64_t>{24});
}

TEST_CASE("Gather with negative indices; GatherElements; GatherND with batch_dims") {
  auto g = run("Gather", {iota({3, 2}), i64({2}, {-1, 0})});
  CHECK(g[0].shape() == Shape{2, 2});
  CHECK(floats(g[0]) == std::vector<float>{4, 5, 0, 1});
  auto g1 = run("Gather", {iota({2, 3}), i64({1, 2}, {2, -3})}, {Attribute::make_int("axis", 1)});
  CHECK(g1[0].shape() == Shape{2, 1, 2});
  CHECK(floats(g1[0]) == std::vector<float>{2, 0, 5, 3});
  auto ge = run("GatherElements", {iota({2, 2}), i64({2, 2}, {1, -2, 0, 1})}, {Attribute::make_int("axis", 1)});
  CHECK(floats(ge[0]) == std::vector<float>{1, 0, 2, 3});
  auto nd = run("GatherND", {iota({2, 2, 2}), i64({2, 1}, {1, 0})}, {Attribute::make_int("batch_dims", 1)});
  CHECK(nd[0].shape() == Shape{2, 2});
  CHECK(floats(nd[0]) == std::vector<float>{2, 3, 4, 5});
  CHECK_FALSE(try_run("Gather", {iota({3}), i64({1}, {3})}).has_value());
}

TEST_CASE("ScatterElements with add reduction and ScatterND") {
  auto se = run("ScatterElements", {iota({1, 3}), i64({1, 2}, {2, 2}), f32({1, 2}, {10, 20})}, {Attribute::make_int("axis", 1), Attribute::make_string("reduction", "add")});
  CHECK(floats(se[0]) == std::vector<float>{0, 1, 32});
  auto nd = run("ScatterND", {iota({2, 2}), i64({1, 1}, {1}), f32({1, 2}, {7, 8})});
  CHECK(floats(nd[0]) == std::vector<float>{0, 1, 7, 8});
}

TEST_CASE("Cast covers float16 and strings, and refuses complex numbers") {
  auto h = run("Cast", {f32({2}, {1.5f, -2.0f})}, {Attribute::make_int("to", 10)});
  REQUIRE(h[0].dtype() == DType::Float16);
  CHECK(h[0].to_doubles() == std::vector<double>{1.5, -2.0});
  // Truncation, as the ONNX reference does: rounding would give 1.0078125.
  auto bf = run("Cast", {f32({1}, {1.0048828125f})}, {Attribute::make_int("to", 16)});
  REQUIRE(bf[0].dtype() == DType::BFloat16);
  CHECK(bf[0].to_doubles() == std::vector<double>{1.0});
  auto i = run("Cast", {f32({2}, {2.7f, -1.2f})}, {Attribute::make_int("to", 6)});
  CHECK(i[0].to_int64s() == std::vector<int64_t>{2, -1});
  auto like = run("CastLike", {f32({1}, {3.0f}), Tensor::scalar<double>(0.0)});
  CHECK(like[0].dtype() == DType::Float64);
  auto str = run("Cast", {f32({2}, {1.0f, 0.25f})}, {Attribute::make_int("to", 8)});
  REQUIRE(str[0].dtype() == DType::String);
  CHECK(std::vector<std::string>(str[0].strings().begin(), str[0].strings().end()) ==
        std::vector<std::string>{"1", "0.25"});
  auto complex = try_run("Cast", {f32({1}, {1})}, {Attribute::make_int("to", 14)});
  REQUIRE_FALSE(complex.has_value());
  CHECK(complex.status().code() == StatusCode::Unsupported);
}

TEST_CASE("Constant forms and ConstantOfShape") {
  auto ints = run("Constant", {}, {Attribute::make_ints("value_ints", {4, 5})});
  CHECK(ints[0].to_int64s() == std::vector<int64_t>{4, 5});
  auto fl = run("Constant", {}, {Attribute::make_float("value_float", 2.5f)});
  CHECK(fl[0].rank() == 0);
  CHECK(floats(fl[0]) == std::vector<float>{2.5f});
  auto t = run("Constant", {}, {Attribute::make_tensor("value", i64({2}, {7, 8}))});
  CHECK(t[0].to_int64s() == std::vector<int64_t>{7, 8});
  auto s = try_run("Constant", {}, {Attribute::make_string("value_string", "x")});
  CHECK_FALSE(s.has_value());
  auto c = run("ConstantOfShape", {i64({2}, {2, 1})}, {Attribute::make_tensor("value", Tensor::from_vector<int32_t>({1}, {9}))});
  CHECK(c[0].dtype() == DType::Int32);
  CHECK(c[0].to_int64s() == std::vector<int64_t>{9, 9});
  auto d = run("ConstantOfShape", {i64({1}, {3})});
  CHECK(floats(d[0]) == std::vector<float>{0, 0, 0});
}

TEST_CASE("Identity and Dropout pass data through; Dropout mask is all true; training refused") {
  auto id = run("Identity", {iota({3})});
  CHECK(floats(id[0]) == std::vector<float>{0, 1, 2});
  auto dr = run("Dropout", {iota({3})}, {}, 13, 2);
  CHECK(floats(dr[0]) == std::vector<float>{0, 1, 2});
  REQUIRE(dr[1].dtype() == DType::Bool);
  CHECK(dr[1].to_int64s() == std::vector<int64_t>{1, 1, 1});
  auto train = try_run("Dropout", {iota({3}), Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(true)});
  REQUIRE_FALSE(train.has_value());
  CHECK(train.status().code() == StatusCode::Unsupported);
}

TEST_CASE("Pad: constant via attributes at opset 2, reflect and edge via inputs") {
  auto c = run("Pad", {iota({2})}, {Attribute::make_ints("pads", {1, 2}), Attribute::make_float("value", 9)}, 2);
  CHECK(floats(c[0]) == std::vector<float>{9, 0, 1, 9, 9});
  auto r = run("Pad", {iota({1, 3}), i64({4}, {0, 2, 0, 3})}, {Attribute::make_string("mode", "reflect")});
  CHECK(floats(r[0]) == std::vector<float>{2, 1, 0, 1, 2, 1, 0, 1});
  auto e = run("Pad", {iota({2, 2}), i64({4}, {1, 0, 0, 1})}, {Attribute::make_string("mode", "edge")});
  CHECK(e[0].shape() == Shape{3, 3});
  CHECK(floats(e[0]) == std::vector<float>{0, 1, 1, 0, 1, 1, 2, 3, 3});
  auto crop = run("Pad", {iota({4}), i64({2}, {-1, 1}), f32({}, {7})});
  CHECK(floats(crop[0]) == std::vector<float>{1, 2, 3, 7});
}

TEST_CASE("Expand, Tile and Range") {
  auto ex = run("Expand", {f32({2, 1}, {1, 2}), i64({3}, {2, 1, 3})});
  CHECK(ex[0].shape() == Shape{2, 2, 3});
  CHECK(floats(ex[0]) == std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  auto tile = run("Tile", {f32({2}, {1, 2}), i64({1}, {3})});
  CHECK(floats(tile[0]) == std::vector<float>{1, 2, 1, 2, 1, 2});
  auto rg = run("Range", {Tensor::scalar<int32_t>(10), Tensor::scalar<int32_t>(4), Tensor::scalar<int32_t>(-3)});
  CHECK(rg[0].to_int64s() == std::vector<int64_t>{10, 7});
}

TEST_CASE("Huge requested sizes are refused, not allocated") {
  const int64_t big = int64_t{1} << 40;
  auto tile = try_run("Tile", {f32({2}, {1, 2}), i64({1}, {big})});
  REQUIRE_FALSE(tile.has_value());
  CHECK(tile.status().code() == StatusCode::InvalidInput);
  CHECK_FALSE(try_run("Tile", {f32({2}, {1, 2}), i64({1}, {INT64_MAX})}).has_value());
  CHECK_FALSE(try_run("Expand", {f32({1}, {1}), i64({2}, {big, big})}).has_value());
  CHECK_FALSE(try_run("Pad", {f32({1}, {1}), i64({2}, {0, big})}).has_value());
  CHECK_FALSE(try_run("ConstantOfShape", {i64({3}, {big, big, big})}).has_value());
  CHECK_FALSE(try_run("Reshape", {f32({1}, {1}), i64({3}, {big, big, big})}).has_value());
}

TEST_CASE("Trilu, DepthToSpace, SpaceToDepth") {
  auto up = run("Trilu", {iota({3, 3}), Tensor::scalar<int64_t>(1)});
  CHECK(floats(up[0]) == std::vector<float>{0, 1, 2, 0, 0, 5, 0, 0, 0});
  auto low = run("Trilu", {iota({2, 3})}, {Attribute::make_int("upper", 0)});
  CHECK(floats(low[0]) == std::vector<float>{0, 0, 0, 3, 4, 0});
  auto d2s = run("DepthToSpace", {iota({1, 4, 1, 1})}, {Attribute::make_int("blocksize", 2)});
  CHECK(d2s[0].shape() == Shape{1, 1, 2, 2});
  CHECK(floats(d2s[0]) == std::vector<float>{0, 1, 2, 3});
  auto s2d = run("SpaceToDepth", {iota({1, 1, 2, 2})}, {Attribute::make_int("blocksize", 2)});
  CHECK(s2d[0].shape() == Shape{1, 4, 1, 1});
  auto crd = run("DepthToSpace", {iota({1, 8, 1, 1})}, {Attribute::make_int("blocksize", 2), Attribute::make_string("mode", "CRD")});
  CHECK(floats(crd[0]) == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("OneHot with negative index and axis; NonZero; EyeLike") {
  auto oh = run("OneHot", {i64({2}, {-1, 1}), Tensor::scalar<int64_t>(3), f32({2}, {0, 5})}, {Attribute::make_int("axis", 0)});
  CHECK(oh[0].shape() == Shape{3, 2});
  CHECK(floats(oh[0]) == std::vector<float>{0, 0, 0, 5, 5, 0});
  auto nz = run("NonZero", {f32({2, 2}, {1, 0, 0, 3})});
  CHECK(nz[0].shape() == Shape{2, 2});
  CHECK(nz[0].to_int64s() == std::vector<int64_t>{0, 1, 0, 1});
  auto eye = run("EyeLike", {iota({2, 3})}, {Attribute::make_int("k", 1)});
  CHECK(floats(eye[0]) == std::vector<float>{0, 1, 0, 0, 0, 1});
}

TEST_CASE("Data movement handles bool, float16 and int8 alike") {
  auto b = run("Transpose", {Tensor::from_vector<bool>({2, 2}, {true, false, false, false})});
  CHECK(b[0].to_int64s() == std::vector<int64_t>{1, 0, 0, 0});
  Tensor half = f32({3}, {1, 2, 3}).cast(DType::Float16);
  auto sl = run("Slice", {half, i64({1}, {-1}), i64({1}, {-4}), i64({1}, {0}), i64({1}, {-1})});
  CHECK(sl[0].dtype() == DType::Float16);
  CHECK(sl[0].to_doubles() == std::vector<double>{3, 2, 1});
  auto c = run("Concat", {Tensor::from_vector<int8_t>({1}, {-3}), Tensor::from_vector<int8_t>({2}, {4, 5})}, {Attribute::make_int("axis", 0)});
  CHECK(c[0].to_int64s() == std::vector<int64_t>{-3, 4, 5});
}

}  // namespace qflow
