// Helpers for the lowered-model tests: build small Models by hand and run them.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "qflow/runtime/fixed_point.h"
#include "qflow/runtime/executor.h"

namespace qflow::lowered::test {

inline Attribute ints(std::string name, std::vector<int64_t> v) { return Attribute{std::move(name), std::move(v), {}, {}}; }
inline Attribute floats(std::string name, std::vector<double> v) { return Attribute{std::move(name), {}, std::move(v), {}}; }
inline Attribute strings(std::string name, std::vector<std::string> v) { return Attribute{std::move(name), {}, {}, std::move(v)}; }
inline Attribute multiplier(std::string name, fx::Multiplier m) { return ints(std::move(name), {m.mantissa, m.shift}); }

inline fx::Multiplier make_mult(double real) {
  fx::Multiplier m;
  const Status s = fx::make_multiplier(real, m);
  REQUIRE(s.is_ok());
  return m;
}

inline fx::QType qtype_of(ElemType t) {
  switch (t) {
    case ElemType::u8: return fx::QType::UInt8;
    case ElemType::i16: return fx::QType::Int16;
    case ElemType::u16: return fx::QType::UInt16;
    default: return fx::QType::Int8;
  }
}

inline fx::QParams qp(ElemType t, Quant q) { return fx::QParams{q.scale, q.zero_point, qtype_of(t)}; }

struct Builder {
  Model model;

  Builder() { model.name = "test"; }

  int32_t tensor(std::string name, ElemType type, std::vector<int64_t> shape, Quant quant = {}) {
    Tensor t;
    t.name = std::move(name);
    t.type = type;
    t.shape = std::move(shape);
    t.quant = quant;
    model.tensors.push_back(std::move(t));
    return static_cast<int32_t>(model.tensors.size() - 1);
  }

  int32_t input(std::string name, std::vector<int64_t> shape) {
    const int32_t t = tensor(std::move(name), ElemType::f32, std::move(shape));
    model.inputs.push_back(t);
    return t;
  }

  int32_t output(std::string name, std::vector<int64_t> shape) {
    const int32_t t = tensor(std::move(name), ElemType::f32, std::move(shape));
    model.outputs.push_back(t);
    return t;
  }

  // A constant with integer elements of `type` (i8, u8, i16, u16, i32, i64).
  int32_t constant_ints(std::string name, ElemType type, std::vector<int64_t> shape, const std::vector<int64_t>& values,
                        Quant quant = {}) {
    const int32_t t = tensor(std::move(name), type, std::move(shape), quant);
    Tensor& x = model.tensors[static_cast<size_t>(t)];
    x.constant = true;
    const size_t es = element_size(type);
    for (const int64_t v : values)
      for (size_t b = 0; b < es; ++b) x.data.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * b)));
    return t;
  }

  int32_t constant_f32(std::string name, std::vector<int64_t> shape, const std::vector<float>& values) {
    const int32_t t = tensor(std::move(name), ElemType::f32, std::move(shape));
    Tensor& x = model.tensors[static_cast<size_t>(t)];
    x.constant = true;
    for (const float f : values) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      for (int b = 0; b < 4; ++b) x.data.push_back(static_cast<uint8_t>(u >> (8 * b)));
    }
    return t;
  }

  Op& op(SegmentKind kind, std::string type, std::vector<int32_t> in, std::vector<int32_t> out,
         std::vector<Attribute> attrs = {}) {
    if (model.segments.empty() || model.segments.back().kind != kind)
      model.segments.push_back(Segment{static_cast<uint32_t>(model.segments.size()), kind, {}});
    std::sort(attrs.begin(), attrs.end(), [](const Attribute& a, const Attribute& b) { return a.name < b.name; });
    Op o;
    o.type = std::move(type);
    o.name = std::to_string(model.segments.back().ops.size());
    o.name.insert(o.name.begin(), 'n');
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.attributes = std::move(attrs);
    model.segments.back().ops.push_back(std::move(o));
    return model.segments.back().ops.back();
  }
  Op& bpu(std::string type, std::vector<int32_t> in, std::vector<int32_t> out, std::vector<Attribute> attrs = {}) {
    return op(SegmentKind::bpu, std::move(type), std::move(in), std::move(out), std::move(attrs));
  }
  Op& cpu(std::string type, std::vector<int32_t> in, std::vector<int32_t> out, std::vector<Attribute> attrs = {}) {
    return op(SegmentKind::cpu, "cpu." + type, std::move(in), std::move(out), std::move(attrs));
  }
};

// Runs a model on float inputs; fails the test on an error.
inline std::vector<std::vector<float>> run(const Model& model, const std::vector<std::vector<float>>& inputs) {
  auto ex = Executor::create(model);
  REQUIRE_MESSAGE(ex.has_value(), ex.message());
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  std::vector<std::vector<float>> outputs;
  const Status s = ex->run(spans, outputs);
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  return outputs;
}

// The error message of running (or creating) a model; empty when it succeeds.
inline std::string run_error(const Model& model, const std::vector<std::vector<float>>& inputs) {
  auto ex = Executor::create(model);
  if (!ex.has_value()) return ex.message();
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  std::vector<std::vector<float>> outputs;
  const Status s = ex->run(spans, outputs);
  return s.is_ok() ? std::string() : s.message();
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace qflow::lowered::test
