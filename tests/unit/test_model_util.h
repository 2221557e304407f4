// Builders the unit tests share for hand-made models and quantization tables.
#pragma once

#include <string>
#include <vector>

#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"

namespace qflow::test {

inline Dim d(int64_t v) { return Dim{v, "", ""}; }
inline Dim sym(const std::string& name) { return Dim{std::nullopt, name, ""}; }

inline ValueType float_type(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DType::Float32;
  t.shape = std::move(dims);
  return t;
}

// Symmetric parameters for a threshold: scale = threshold / qmax (127 or 32767), zero point 0.
inline QuantParams params(double threshold, DType dtype = DType::Int8) {
  QuantParams q;
  q.dtype = dtype;
  q.scale = {static_cast<float>(threshold / (dtype == DType::Int16 ? 32767.0 : 127.0))};
  q.zero_point = {0};
  q.threshold = threshold;
  q.method = "test";
  return q;
}

}  // namespace qflow::test
