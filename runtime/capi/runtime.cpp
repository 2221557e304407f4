// The runtime C API (runtime/include/qflow/runtime.h): decode_hbm + Executor behind opaque
// handles. No exception crosses the C boundary: every entry point catches and reports.
#include "qflow/runtime.h"

#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/runtime/hbm_reader.h"
#include "qflow/runtime/executor.h"
#include "qflow/runtime/hbm_codec.h"

#define QFLOW_RT_EXPORT __attribute__((visibility("default")))

struct qflow_rt_model {
  qflow::lowered::Model model;  // as decoded; the executor holds its own copy
  std::optional<qflow::lowered::Executor> executor;
  std::vector<std::string> input_names, output_names;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  std::vector<qflow_rt_tensor_info> inputs, outputs;
  std::vector<qflow::lowered::ElemType> input_types;  // quantized form, f32 when float only
};

namespace {

using qflow::lowered::ElemType;

thread_local std::string last_error;

qflow_rt_status fail(std::string message) {
  last_error = std::move(message);
  return QFLOW_RT_ERROR;
}

qflow_rt_status ok() {
  last_error.clear();
  return QFLOW_RT_OK;
}

// Runs `body` (which returns a status), turning any exception into an error.
template <typename F>
qflow_rt_status guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail("qflow_rt: out of memory");
  } catch (const std::exception& e) {
    return fail(std::string("qflow_rt: internal error: ") + e.what());
  } catch (...) {
    return fail("qflow_rt: internal error: unknown exception");
  }
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d < 0 ? 0 : d);
  return n;
}

qflow_rt_status load(std::span<const uint8_t> bytes, qflow_rt_model** out) {
  qflow::Expected<qflow::lowered::Model> decoded = qflow::lowered::decode_hbm(bytes);
  if (!decoded) return fail(decoded.status().message());
  auto handle = std::make_unique<qflow_rt_model>();
  handle->model = std::move(*decoded);
  qflow::Expected<qflow::lowered::Executor> executor = qflow::lowered::Executor::create(handle->model);
  if (!executor) return fail(executor.status().message());
  handle->executor.emplace(std::move(*executor));

  const qflow::lowered::Model& m = handle->model;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const qflow::lowered::Tensor& t = m.tensors[static_cast<size_t>(m.inputs[i])];
    handle->input_names.push_back(t.name);
    handle->input_shapes.push_back(t.shape);
    ElemType type = ElemType::f32;
    qflow::lowered::Quant quant;
    if (!handle->executor->quantized_input(i, type, quant) || !qflow::lowered::is_quantized(type)) {
      type = ElemType::f32;
      quant = {};
    }
    handle->input_types.push_back(type);
    qflow_rt_tensor_info info{};
    info.quantized_dtype = static_cast<qflow_rt_dtype>(type);
    info.scale = type == ElemType::f32 ? 1.0f : static_cast<float>(quant.scale);
    info.zero_point = type == ElemType::f32 ? 0 : quant.zero_point;
    handle->inputs.push_back(info);
  }
  for (int32_t o : m.outputs) {
    const qflow::lowered::Tensor& t = m.tensors[static_cast<size_t>(o)];
    handle->output_names.push_back(t.name);
    handle->output_shapes.push_back(t.shape);
    qflow_rt_tensor_info info{};
    info.quantized_dtype = QFLOW_RT_FLOAT32;
    info.scale = 1.0f;
    handle->outputs.push_back(info);
  }
  // The strings and shapes are final now: their pointers stay valid while the model lives.
  for (size_t i = 0; i < handle->inputs.size(); ++i) {
    handle->inputs[i].name = handle->input_names[i].c_str();
    handle->inputs[i].rank = handle->input_shapes[i].size();
    handle->inputs[i].shape = handle->input_shapes[i].data();
    handle->inputs[i].element_count = element_count(handle->input_shapes[i]);
  }
  for (size_t i = 0; i < handle->outputs.size(); ++i) {
    handle->outputs[i].name = handle->output_names[i].c_str();
    handle->outputs[i].rank = handle->output_shapes[i].size();
    handle->outputs[i].shape = handle->output_shapes[i].data();
    handle->outputs[i].element_count = element_count(handle->output_shapes[i]);
  }
  *out = handle.release();
  return ok();
}

qflow_rt_status copy_outputs(const qflow_rt_model* model, const std::vector<std::vector<float>>& results,
                             float* const* outputs) {
  if (results.size() != model->outputs.size()) {
    return fail("qflow_rt: the model produced " + std::to_string(results.size()) + " outputs, expected " +
                std::to_string(model->outputs.size()));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].size() != model->outputs[i].element_count) {
      return fail("qflow_rt: output " + std::to_string(i) + " '" + model->output_names[i] + "' has " +
                  std::to_string(results[i].size()) + " elements, expected " +
                  std::to_string(model->outputs[i].element_count));
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].empty()) std::memcpy(outputs[i], results[i].data(), results[i].size() * sizeof(float));
  }
  return ok();
}

qflow_rt_status check_buffers(const qflow_rt_model* model, const void* inputs, float* const* outputs) {
  if (!model) return fail("qflow_rt: model is NULL");
  if (!model->inputs.empty() && !inputs) return fail("qflow_rt: inputs is NULL");
  if (!model->outputs.empty() && !outputs) return fail("qflow_rt: outputs is NULL");
  for (size_t i = 0; i < model->outputs.size(); ++i) {
    if (!outputs[i] && model->outputs[i].element_count != 0)
      return fail("qflow_rt: output buffer " + std::to_string(i) + " is NULL");
  }
  return QFLOW_RT_OK;
}

template <typename T>
qflow::lowered::IntBuffer widen(const void* data, size_t n) {
  const T* p = static_cast<const T*>(data);
  return qflow::lowered::IntBuffer(p, p + n);
}

}  // namespace

extern "C" {

QFLOW_RT_EXPORT const char* qflow_rt_last_error(void) { return last_error.c_str(); }

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_load_file(const char* path, qflow_rt_model** model) {
  return guarded([&]() -> qflow_rt_status {
    if (!model) return fail("qflow_rt: model output pointer is NULL");
    *model = nullptr;
    if (!path) return fail("qflow_rt: path is NULL");
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(std::string("qflow_rt: cannot open '") + path + "'");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return fail(std::string("qflow_rt: cannot read '") + path + "'");
    return load(bytes, model);
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_load_memory(const void* data, size_t size, qflow_rt_model** model) {
  return guarded([&]() -> qflow_rt_status {
    if (!model) return fail("qflow_rt: model output pointer is NULL");
    *model = nullptr;
    if (!data && size != 0) return fail("qflow_rt: data is NULL");
    const std::vector<uint8_t> bytes(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
    return load(bytes, model);
  });
}

QFLOW_RT_EXPORT void qflow_rt_free(qflow_rt_model* model) { delete model; }

QFLOW_RT_EXPORT const char* qflow_rt_platform(const qflow_rt_model* model) {
  return model ? model->model.platform.c_str() : "";
}

QFLOW_RT_EXPORT size_t qflow_rt_input_count(const qflow_rt_model* model) { return model ? model->inputs.size() : 0; }

QFLOW_RT_EXPORT size_t qflow_rt_output_count(const qflow_rt_model* model) {
  return model ? model->outputs.size() : 0;
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_input_info(const qflow_rt_model* model, size_t index,
                                                    qflow_rt_tensor_info* info) {
  return guarded([&]() -> qflow_rt_status {
    if (!model || !info) return fail("qflow_rt: model or info is NULL");
    if (index >= model->inputs.size())
      return fail("qflow_rt: input index " + std::to_string(index) + " is out of range (the model has " +
                  std::to_string(model->inputs.size()) + " inputs)");
    *info = model->inputs[index];
    return ok();
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_output_info(const qflow_rt_model* model, size_t index,
                                                     qflow_rt_tensor_info* info) {
  return guarded([&]() -> qflow_rt_status {
    if (!model || !info) return fail("qflow_rt: model or info is NULL");
    if (index >= model->outputs.size())
      return fail("qflow_rt: output index " + std::to_string(index) + " is out of range (the model has " +
                  std::to_string(model->outputs.size()) + " outputs)");
    *info = model->outputs[index];
    return ok();
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_run(qflow_rt_model* model, const float* const* inputs,
                                             float* const* outputs) {
  return guarded([&]() -> qflow_rt_status {
    if (check_buffers(model, inputs, outputs) != QFLOW_RT_OK) return QFLOW_RT_ERROR;
    std::vector<std::span<const float>> feeds;
    for (size_t i = 0; i < model->inputs.size(); ++i) {
      if (!inputs[i] && model->inputs[i].element_count != 0)
        return fail("qflow_rt: input buffer " + std::to_string(i) + " is NULL");
      feeds.emplace_back(inputs[i], model->inputs[i].element_count);
    }
    std::vector<std::vector<float>> results;
    if (qflow::Status s = model->executor->run(feeds, results); !s) return fail(s.message());
    return copy_outputs(model, results, outputs);
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_run_quantized(qflow_rt_model* model, const void* const* inputs,
                                                       float* const* outputs) {
  return guarded([&]() -> qflow_rt_status {
    if (check_buffers(model, inputs, outputs) != QFLOW_RT_OK) return QFLOW_RT_ERROR;
    std::vector<qflow::lowered::Value> values;
    for (size_t i = 0; i < model->inputs.size(); ++i) {
      const size_t n = model->inputs[i].element_count;
      if (!inputs[i] && n != 0) return fail("qflow_rt: input buffer " + std::to_string(i) + " is NULL");
      qflow::lowered::Value v;
      v.type = model->input_types[i];
      v.shape = model->input_shapes[i];
      switch (v.type) {
        case ElemType::i8: v.ints = widen<int8_t>(inputs[i], n); break;
        case ElemType::u8: v.ints = widen<uint8_t>(inputs[i], n); break;
        case ElemType::i16: v.ints = widen<int16_t>(inputs[i], n); break;
        case ElemType::u16: v.ints = widen<uint16_t>(inputs[i], n); break;
        default: {
          const float* p = static_cast<const float*>(inputs[i]);
          v.floats.assign(p, p + n);
        }
      }
      values.push_back(std::move(v));
    }
    std::vector<std::vector<float>> results;
    if (qflow::Status s = model->executor->run_values(values, results); !s) return fail(s.message());
    return copy_outputs(model, results, outputs);
  });
}

}  // extern "C"
