// Graph-building helpers shared by the bpu backend tests.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/backends/bpu/bpu_backend.h"
#include "plugins/backends/bpu/bpu_platform.h"

namespace qflow::bpu_test {

inline BpuPlatform platform(const std::string& name) {
  auto loaded = load_bpu_platform(QFLOW_BPU_PLATFORM_DIR, name);
  REQUIRE_MESSAGE(loaded.has_value(), loaded.status().message());
  return loaded.value();
}

inline BpuBackend backend_for(const std::string& name, BpuPlacementOverrides overrides = {}) {
  return BpuBackend(platform(name), std::move(overrides));
}

inline Value* conv(Graph& g, const std::string& name, Value* in, Shape weight_shape) {
  Value* w = g.get_or_create_value(name + "_W");
  g.set_initializer(w, Tensor(DType::Float32, weight_shape));
  Value* out = g.get_or_create_value(name + "_out");
  g.add_node("Conv", {in, w}, {out}, name);
  return out;
}

inline Value* unary(Graph& g, const std::string& op, const std::string& name, Value* in) {
  Value* out = g.get_or_create_value(name + "_out");
  g.add_node(op, {in}, {out}, name);
  return out;
}

inline Value* binary(Graph& g, const std::string& op, const std::string& name, Value* a, Value* b) {
  Value* out = g.get_or_create_value(name + "_out");
  g.add_node(op, {a, b}, {out}, name);
  return out;
}

// Declares a static shape on a value (what shape inference would have written).
inline void set_shape(Value* v, const std::vector<int64_t>& dims) {
  ValueType type;
  type.dtype = DType::Float32;
  std::vector<Dim> shape;
  for (int64_t d : dims) shape.push_back(Dim{d, "", ""});
  type.shape = shape;
  v->type = type;
}

// A folder of platform files that disappears with the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("qflow_bpu_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

// The keys every platform file needs besides [ops].
inline std::string platform_header(const std::string& name) {
  return "name = \"" + name + "\"\n"
         "dtypes = { activation = [\"int8\"], weight = [\"int8\"] }\n"
         "cost = { macs-per-cycle = 1, frequency-mhz = 1, bandwidth-gbps = 1 }\n";
}

}  // namespace qflow::bpu_test
