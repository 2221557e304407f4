// The runtime C API (runtime/include/qflow/runtime.h): decode_hbm + Executor behind opaque
// handles. No exception crosses the C boundary: every entry point catches and reports.
//
// A model handle shares an immutable core (the executor and the tensor descriptions) with the
// contexts made from it, so freeing the handle never pulls a model from under a running
// context. Handles are checked against a registry of live ones: a freed or foreign pointer
// is reported instead of dereferenced (a later allocation at the same address cannot be
// told apart, which is why the header says "as far as the library can tell").
#include "qflow/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "qflow/runtime/executor.h"
#include "qflow/runtime/hbm_codec.h"
#include "qflow/runtime/hbm_file.h"

#define QFLOW_RT_EXPORT __attribute__((visibility("default")))

namespace {

using qflow::lowered::ElemType;

// What a model handle and its contexts share; never changed after load.
struct ModelCore {
  explicit ModelCore(qflow::lowered::Executor e) : executor(std::move(e)) {}
  qflow::lowered::Executor executor;
  std::vector<std::string> input_names, output_names;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  std::vector<qflow_rt_tensor_info> inputs, outputs;
  std::vector<ElemType> input_types;   // quantized form, f32 when float only
  std::vector<ElemType> output_types;  // raw form, f32 when computed in float
  std::vector<char> raw_outputs;       // per output: has a raw form
};

}  // namespace

struct qflow_rt_model {
  std::shared_ptr<const ModelCore> core;
};

struct qflow_rt_context {
  std::shared_ptr<const ModelCore> core;
  qflow::lowered::Scratch scratch;
  std::vector<qflow::lowered::Value> inputs;
  std::vector<char> input_set;
  std::vector<std::vector<float>> outputs;
  std::vector<qflow::lowered::Value> raw;
  bool has_result = false;
  mutable std::atomic<bool> busy{false};
};

namespace {

thread_local std::string last_error;

qflow_rt_status fail(qflow_rt_status code, std::string message) {
  last_error = std::move(message);
  return code;
}

qflow_rt_status ok() {
  last_error.clear();
  return QFLOW_RT_OK;
}

// --- live handles --------------------------------------------------------------------------
// Function-local statics: usable from any static initializer of an application.
std::shared_mutex& registry_mutex() {
  static std::shared_mutex m;
  return m;
}
std::unordered_set<const void*>& live_handles() {
  static std::unordered_set<const void*> s;
  return s;
}
void register_handle(const void* p) {
  std::unique_lock lock(registry_mutex());
  live_handles().insert(p);
}
// True when p was live (and is no longer).
bool unregister_handle(const void* p) {
  std::unique_lock lock(registry_mutex());
  return live_handles().erase(p) != 0;
}
bool is_live(const void* p) {
  std::shared_lock lock(registry_mutex());
  return live_handles().count(p) != 0;
}

// Models and contexts are distinct types at distinct addresses, but one registry would let a
// context pass for a model: each kind has its own tag in the stored address's low bit.
const void* model_key(const qflow_rt_model* m) { return m; }
const void* context_key(const qflow_rt_context* c) {
  return reinterpret_cast<const char*>(c) + 1;  // never dereferenced, only compared
}

qflow_rt_status check_model(const qflow_rt_model* model, const char* what = "model") {
  if (!model) return fail(QFLOW_RT_ERROR_NULL_POINTER, std::string("qflow_rt: ") + what + " is NULL");
  if (!is_live(model_key(model)))
    return fail(QFLOW_RT_ERROR_INVALID_HANDLE,
                std::string("qflow_rt: ") + what + " is not a live model handle (freed already, or never loaded)");
  return QFLOW_RT_OK;
}

qflow_rt_status check_context(const qflow_rt_context* context) {
  if (!context) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: context is NULL");
  if (!is_live(context_key(context)))
    return fail(QFLOW_RT_ERROR_INVALID_HANDLE,
                "qflow_rt: context is not a live context handle (freed already, or never created)");
  return QFLOW_RT_OK;
}

// Holds a context for one call; a second thread entering the same context is refused.
class Claim {
 public:
  explicit Claim(const qflow_rt_context* c) : context_(c), held_(!c->busy.exchange(true, std::memory_order_acquire)) {}
  ~Claim() {
    if (held_) context_->busy.store(false, std::memory_order_release);
  }
  bool held() const { return held_; }

 private:
  const qflow_rt_context* context_;
  bool held_;
};

qflow_rt_status busy() {
  return fail(QFLOW_RT_ERROR_BUSY, "qflow_rt: the context is in use by another thread (one context per thread)");
}

bool mentions_memory(const std::string& message) { return message.find("out of memory") != std::string::npos; }

// Runs `body` (which returns a status), turning any exception into an error.
template <typename F>
qflow_rt_status guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(QFLOW_RT_ERROR_OUT_OF_MEMORY, "qflow_rt: out of memory");
  } catch (const std::exception& e) {
    return fail(QFLOW_RT_ERROR_INTERNAL, std::string("qflow_rt: internal error: ") + e.what());
  } catch (...) {
    return fail(QFLOW_RT_ERROR_INTERNAL, "qflow_rt: internal error: unknown exception");
  }
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d < 0 ? 0 : d);
  return n;
}

size_t dtype_size(int dtype) {
  switch (dtype) {
    case QFLOW_RT_FLOAT32: return 4;
    case QFLOW_RT_INT8: case QFLOW_RT_UINT8: return 1;
    case QFLOW_RT_INT16: case QFLOW_RT_UINT16: return 2;
    default: return 0;
  }
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case QFLOW_RT_FLOAT32: return "FLOAT32";
    case QFLOW_RT_INT8: return "INT8";
    case QFLOW_RT_UINT8: return "UINT8";
    case QFLOW_RT_INT16: return "INT16";
    case QFLOW_RT_UINT16: return "UINT16";
    default: return "?";
  }
}

// A failed decode is a format error, unless the header names a format version this runtime
// does not read (the reader refuses those before anything else, after the magic).
qflow_rt_status load_failure(std::span<const uint8_t> bytes, const std::string& message) {
  if (mentions_memory(message)) return fail(QFLOW_RT_ERROR_OUT_OF_MEMORY, message);
  const auto& magic = qflow::hbm::kMagic;
  if (bytes.size() >= magic.size() + 2 && std::equal(magic.begin(), magic.end(), bytes.begin())) {
    const auto major = static_cast<uint16_t>(bytes[8] | bytes[9] << 8);
    if (major != qflow::hbm::kVersionMajor) return fail(QFLOW_RT_ERROR_UNSUPPORTED_VERSION, message);
  }
  return fail(QFLOW_RT_ERROR_BAD_FORMAT, message);
}

qflow_rt_status load(std::span<const uint8_t> bytes, qflow_rt_model** out) {
  qflow::Expected<qflow::lowered::Model> decoded = qflow::lowered::decode_hbm(bytes);
  if (!decoded) return load_failure(bytes, decoded.status().message());
  qflow::Expected<qflow::lowered::Executor> executor = qflow::lowered::Executor::create(std::move(*decoded));
  if (!executor) return load_failure(bytes, executor.status().message());
  auto core = std::make_shared<ModelCore>(std::move(*executor));

  const qflow::lowered::Model& m = core->executor.model();
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const qflow::lowered::Tensor& t = m.tensors[static_cast<size_t>(m.inputs[i])];
    core->input_names.push_back(t.name);
    core->input_shapes.push_back(t.shape);
    ElemType type = ElemType::f32;
    qflow::lowered::Quant quant;
    if (!core->executor.quantized_input(i, type, quant) || !qflow::lowered::is_quantized(type)) {
      type = ElemType::f32;
      quant = {};
    }
    core->input_types.push_back(type);
    qflow_rt_tensor_info info{};
    info.quantized_dtype = static_cast<qflow_rt_dtype>(type);
    info.scale = type == ElemType::f32 ? 1.0f : static_cast<float>(quant.scale);
    info.zero_point = type == ElemType::f32 ? 0 : quant.zero_point;
    core->inputs.push_back(info);
  }
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    const qflow::lowered::Tensor& t = m.tensors[static_cast<size_t>(m.outputs[k])];
    core->output_names.push_back(t.name);
    core->output_shapes.push_back(t.shape);
    ElemType type = ElemType::f32;
    qflow::lowered::Quant quant;
    const bool raw = core->executor.raw_output(k, type, quant) && qflow::lowered::is_quantized(type);
    if (!raw) {
      type = ElemType::f32;
      quant = {};
    }
    core->output_types.push_back(type);
    core->raw_outputs.push_back(raw ? 1 : 0);
    qflow_rt_tensor_info info{};
    info.quantized_dtype = static_cast<qflow_rt_dtype>(type);
    info.scale = raw ? static_cast<float>(quant.scale) : 1.0f;
    info.zero_point = raw ? quant.zero_point : 0;
    core->outputs.push_back(info);
  }
  // The strings and shapes are final now: their pointers stay valid while the core lives.
  for (size_t i = 0; i < core->inputs.size(); ++i) {
    core->inputs[i].name = core->input_names[i].c_str();
    core->inputs[i].rank = core->input_shapes[i].size();
    core->inputs[i].shape = core->input_shapes[i].data();
    core->inputs[i].element_count = element_count(core->input_shapes[i]);
  }
  for (size_t i = 0; i < core->outputs.size(); ++i) {
    core->outputs[i].name = core->output_names[i].c_str();
    core->outputs[i].rank = core->output_shapes[i].size();
    core->outputs[i].shape = core->output_shapes[i].data();
    core->outputs[i].element_count = element_count(core->output_shapes[i]);
  }
  auto handle = std::make_unique<qflow_rt_model>();
  handle->core = std::move(core);
  register_handle(model_key(handle.get()));
  *out = handle.release();
  return ok();
}

// An executor failure after the C API checked everything it could: a bug, or memory.
qflow_rt_status run_failure(const std::string& message) {
  return fail(mentions_memory(message) ? QFLOW_RT_ERROR_OUT_OF_MEMORY : QFLOW_RT_ERROR_INTERNAL, message);
}

qflow_rt_status copy_outputs(const ModelCore& core, const std::vector<std::vector<float>>& results,
                             float* const* outputs) {
  if (results.size() != core.outputs.size())
    return fail(QFLOW_RT_ERROR_INTERNAL, "qflow_rt: the model produced " + std::to_string(results.size()) +
                                             " outputs, expected " + std::to_string(core.outputs.size()));
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].size() != core.outputs[i].element_count) {
      return fail(QFLOW_RT_ERROR_INTERNAL, "qflow_rt: output " + std::to_string(i) + " '" + core.output_names[i] +
                                               "' has " + std::to_string(results[i].size()) + " elements, expected " +
                                               std::to_string(core.outputs[i].element_count));
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].empty()) std::memcpy(outputs[i], results[i].data(), results[i].size() * sizeof(float));
  }
  return ok();
}

qflow_rt_status check_buffers(const qflow_rt_model* model, const void* inputs, float* const* outputs) {
  if (qflow_rt_status s = check_model(model); s != QFLOW_RT_OK) return s;
  const ModelCore& core = *model->core;
  if (!core.inputs.empty() && !inputs) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: inputs is NULL");
  if (!core.outputs.empty() && !outputs) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: outputs is NULL");
  for (size_t i = 0; i < core.outputs.size(); ++i) {
    if (!outputs[i] && core.outputs[i].element_count != 0)
      return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: output buffer " + std::to_string(i) + " is NULL");
  }
  return QFLOW_RT_OK;
}

template <typename T>
qflow::lowered::IntBuffer widen(const void* data, size_t n) {
  const T* p = static_cast<const T*>(data);
  return qflow::lowered::IntBuffer(p, p + n);
}

// A quantized or float input value from a caller's buffer of `type` elements.
qflow::lowered::Value input_value(ElemType type, const std::vector<int64_t>& shape, const void* data, size_t n) {
  qflow::lowered::Value v;
  v.type = type;
  v.shape = shape;
  switch (type) {
    case ElemType::i8: v.ints = widen<int8_t>(data, n); break;
    case ElemType::u8: v.ints = widen<uint8_t>(data, n); break;
    case ElemType::i16: v.ints = widen<int16_t>(data, n); break;
    case ElemType::u16: v.ints = widen<uint16_t>(data, n); break;
    default: {
      v.type = ElemType::f32;
      const float* p = static_cast<const float*>(data);
      v.floats.assign(p, p + n);
    }
  }
  return v;
}

template <typename T>
void narrow(const qflow::lowered::IntBuffer& ints, void* data) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < ints.size(); ++i) p[i] = static_cast<T>(ints[i]);
}

std::string index_error(const char* what, size_t index, size_t count) {
  return std::string("qflow_rt: ") + what + " index " + std::to_string(index) + " is out of range (the model has " +
         std::to_string(count) + " " + what + "s)";
}

}  // namespace

extern "C" {

QFLOW_RT_EXPORT const char* qflow_rt_last_error(void) { return last_error.c_str(); }

QFLOW_RT_EXPORT const char* qflow_rt_status_string(qflow_rt_status code) {
  switch (code) {
    case QFLOW_RT_OK: return "ok";
    case QFLOW_RT_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case QFLOW_RT_ERROR_NULL_POINTER: return "null pointer";
    case QFLOW_RT_ERROR_INVALID_HANDLE: return "invalid handle";
    case QFLOW_RT_ERROR_IO: return "i/o error";
    case QFLOW_RT_ERROR_BAD_FORMAT: return "bad file format";
    case QFLOW_RT_ERROR_UNSUPPORTED_VERSION: return "unsupported format version";
    case QFLOW_RT_ERROR_SHAPE_MISMATCH: return "shape or size mismatch";
    case QFLOW_RT_ERROR_WRONG_DTYPE: return "wrong dtype";
    case QFLOW_RT_ERROR_OUT_OF_MEMORY: return "out of memory";
    case QFLOW_RT_ERROR_NOT_READY: return "not ready";
    case QFLOW_RT_ERROR_BUSY: return "context busy";
    case QFLOW_RT_ERROR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

QFLOW_RT_EXPORT size_t qflow_rt_dtype_size(qflow_rt_dtype dtype) { return dtype_size(dtype); }

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_load_file(const char* path, qflow_rt_model** model) {
  return guarded([&]() -> qflow_rt_status {
    if (!model) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: model output pointer is NULL");
    *model = nullptr;
    if (!path) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: path is NULL");
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(QFLOW_RT_ERROR_IO, std::string("qflow_rt: cannot open '") + path + "'");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return fail(QFLOW_RT_ERROR_IO, std::string("qflow_rt: cannot read '") + path + "'");
    return load(bytes, model);
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_load_memory(const void* data, size_t size, qflow_rt_model** model) {
  return guarded([&]() -> qflow_rt_status {
    if (!model) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: model output pointer is NULL");
    *model = nullptr;
    if (!data && size != 0) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: data is NULL");
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(data), size);
    return load(bytes, model);
  });
}

QFLOW_RT_EXPORT void qflow_rt_free(qflow_rt_model* model) {
  if (!model) return;
  if (!unregister_handle(model_key(model))) {
    fail(QFLOW_RT_ERROR_INVALID_HANDLE, "qflow_rt: qflow_rt_free: not a live model handle (freed twice?)");
    return;
  }
  delete model;
}

QFLOW_RT_EXPORT const char* qflow_rt_platform(const qflow_rt_model* model) {
  return check_model(model) == QFLOW_RT_OK ? model->core->executor.model().platform.c_str() : "";
}

QFLOW_RT_EXPORT size_t qflow_rt_input_count(const qflow_rt_model* model) {
  return check_model(model) == QFLOW_RT_OK ? model->core->inputs.size() : 0;
}

QFLOW_RT_EXPORT size_t qflow_rt_output_count(const qflow_rt_model* model) {
  return check_model(model) == QFLOW_RT_OK ? model->core->outputs.size() : 0;
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_input_info(const qflow_rt_model* model, size_t index,
                                                    qflow_rt_tensor_info* info) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_model(model); s != QFLOW_RT_OK) return s;
    if (!info) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: info is NULL");
    const ModelCore& core = *model->core;
    if (index >= core.inputs.size())
      return fail(QFLOW_RT_ERROR_INVALID_ARGUMENT, index_error("input", index, core.inputs.size()));
    *info = core.inputs[index];
    return ok();
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_output_info(const qflow_rt_model* model, size_t index,
                                                     qflow_rt_tensor_info* info) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_model(model); s != QFLOW_RT_OK) return s;
    if (!info) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: info is NULL");
    const ModelCore& core = *model->core;
    if (index >= core.outputs.size())
      return fail(QFLOW_RT_ERROR_INVALID_ARGUMENT, index_error("output", index, core.outputs.size()));
    *info = core.outputs[index];
    return ok();
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_run(qflow_rt_model* model, const float* const* inputs,
                                             float* const* outputs) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_buffers(model, inputs, outputs); s != QFLOW_RT_OK) return s;
    const ModelCore& core = *model->core;
    std::vector<std::span<const float>> feeds;
    for (size_t i = 0; i < core.inputs.size(); ++i) {
      if (!inputs[i] && core.inputs[i].element_count != 0)
        return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: input buffer " + std::to_string(i) + " is NULL");
      feeds.emplace_back(inputs[i], core.inputs[i].element_count);
    }
    std::vector<std::vector<float>> results;
    if (qflow::Status s = core.executor.run(feeds, results); !s) return run_failure(s.message());
    return copy_outputs(core, results, outputs);
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_run_quantized(qflow_rt_model* model, const void* const* inputs,
                                                       float* const* outputs) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_buffers(model, inputs, outputs); s != QFLOW_RT_OK) return s;
    const ModelCore& core = *model->core;
    std::vector<qflow::lowered::Value> values;
    for (size_t i = 0; i < core.inputs.size(); ++i) {
      const size_t n = core.inputs[i].element_count;
      if (!inputs[i] && n != 0)
        return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: input buffer " + std::to_string(i) + " is NULL");
      values.push_back(input_value(core.input_types[i], core.input_shapes[i], inputs[i], n));
    }
    std::vector<std::vector<float>> results;
    if (qflow::Status s = core.executor.run_values(values, results); !s) return run_failure(s.message());
    return copy_outputs(core, results, outputs);
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_context_create(const qflow_rt_model* model, qflow_rt_context** context) {
  return guarded([&]() -> qflow_rt_status {
    if (!context) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: context output pointer is NULL");
    *context = nullptr;
    if (qflow_rt_status s = check_model(model); s != QFLOW_RT_OK) return s;
    auto c = std::make_unique<qflow_rt_context>();
    c->core = model->core;
    const ModelCore& core = *c->core;
    c->inputs.resize(core.inputs.size());
    c->input_set.assign(core.inputs.size(), 0);
    for (size_t i = 0; i < core.inputs.size(); ++i) {
      // Sized now for the common case (floats), so a steady loop does not allocate.
      c->inputs[i].type = ElemType::f32;
      c->inputs[i].shape = core.input_shapes[i];
      c->inputs[i].floats.reserve(core.inputs[i].element_count);
    }
    register_handle(context_key(c.get()));
    *context = c.release();
    return ok();
  });
}

QFLOW_RT_EXPORT void qflow_rt_context_free(qflow_rt_context* context) {
  if (!context) return;
  if (!unregister_handle(context_key(context))) {
    fail(QFLOW_RT_ERROR_INVALID_HANDLE, "qflow_rt: qflow_rt_context_free: not a live context handle (freed twice?)");
    return;
  }
  delete context;
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_context_set_input(qflow_rt_context* context, size_t index,
                                                           qflow_rt_dtype dtype, const void* data, size_t bytes) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_context(context); s != QFLOW_RT_OK) return s;
    const Claim claim(context);
    if (!claim.held()) return busy();
    const ModelCore& core = *context->core;
    if (index >= core.inputs.size())
      return fail(QFLOW_RT_ERROR_INVALID_ARGUMENT, index_error("input", index, core.inputs.size()));
    const qflow_rt_tensor_info& info = core.inputs[index];
    if (dtype_size(dtype) == 0)
      return fail(QFLOW_RT_ERROR_INVALID_ARGUMENT,
                  "qflow_rt: dtype " + std::to_string(static_cast<int>(dtype)) + " is not a qflow_rt_dtype");
    if (dtype != QFLOW_RT_FLOAT32 && dtype != info.quantized_dtype)
      return fail(QFLOW_RT_ERROR_WRONG_DTYPE,
                  std::string("qflow_rt: input ") + std::to_string(index) + " '" + info.name + "' takes FLOAT32" +
                      (info.quantized_dtype != QFLOW_RT_FLOAT32 ? std::string(" or ") + dtype_name(info.quantized_dtype)
                                                                : std::string()) +
                      ", not " + dtype_name(dtype));
    const size_t expected = info.element_count * dtype_size(dtype);
    if (bytes != expected)
      return fail(QFLOW_RT_ERROR_SHAPE_MISMATCH, std::string("qflow_rt: input ") + std::to_string(index) + " '" +
                                                     info.name + "' takes " + std::to_string(expected) + " bytes (" +
                                                     std::to_string(info.element_count) + " " + dtype_name(dtype) +
                                                     "), got " + std::to_string(bytes));
    if (!data && bytes != 0) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: input data is NULL");
    qflow::lowered::Value& v = context->inputs[index];
    if (dtype == QFLOW_RT_FLOAT32) {
      v.type = ElemType::f32;
      const float* p = static_cast<const float*>(data);
      v.floats.assign(p, p + info.element_count);
      v.ints.clear();
    } else {
      v = input_value(core.input_types[index], core.input_shapes[index], data, info.element_count);
    }
    context->input_set[index] = 1;
    return ok();
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_context_run(qflow_rt_context* context) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_context(context); s != QFLOW_RT_OK) return s;
    const Claim claim(context);
    if (!claim.held()) return busy();
    const ModelCore& core = *context->core;
    for (size_t i = 0; i < core.inputs.size(); ++i)
      if (!context->input_set[i])
        return fail(QFLOW_RT_ERROR_NOT_READY, std::string("qflow_rt: input ") + std::to_string(i) + " '" +
                                                  core.inputs[i].name + "' was not set (qflow_rt_context_set_input)");
    context->has_result = false;
    qflow::lowered::RunOptions options;
    options.scratch = &context->scratch;
    options.raw = core.raw_outputs;
    std::vector<qflow::lowered::Value>* raw = &context->raw;
    if (qflow::Status s = core.executor.run_values(context->inputs, context->outputs, options, raw); !s)
      return run_failure(s.message());
    context->has_result = true;
    return ok();
  });
}

QFLOW_RT_EXPORT qflow_rt_status qflow_rt_context_get_output(const qflow_rt_context* context, size_t index,
                                                            qflow_rt_dtype dtype, void* data, size_t bytes) {
  return guarded([&]() -> qflow_rt_status {
    if (qflow_rt_status s = check_context(context); s != QFLOW_RT_OK) return s;
    const Claim claim(context);
    if (!claim.held()) return busy();
    const ModelCore& core = *context->core;
    if (index >= core.outputs.size())
      return fail(QFLOW_RT_ERROR_INVALID_ARGUMENT, index_error("output", index, core.outputs.size()));
    const qflow_rt_tensor_info& info = core.outputs[index];
    if (dtype_size(dtype) == 0)
      return fail(QFLOW_RT_ERROR_INVALID_ARGUMENT,
                  "qflow_rt: dtype " + std::to_string(static_cast<int>(dtype)) + " is not a qflow_rt_dtype");
    if (dtype != QFLOW_RT_FLOAT32 && dtype != info.quantized_dtype)
      return fail(QFLOW_RT_ERROR_WRONG_DTYPE,
                  std::string("qflow_rt: output ") + std::to_string(index) + " '" + info.name + "' gives FLOAT32" +
                      (info.quantized_dtype != QFLOW_RT_FLOAT32
                           ? std::string(" or its raw ") + dtype_name(info.quantized_dtype)
                           : std::string(" only (it is computed in float)")) +
                      ", not " + dtype_name(dtype));
    const size_t expected = info.element_count * dtype_size(dtype);
    if (bytes != expected)
      return fail(QFLOW_RT_ERROR_SHAPE_MISMATCH, std::string("qflow_rt: output ") + std::to_string(index) + " '" +
                                                     info.name + "' is " + std::to_string(expected) + " bytes (" +
                                                     std::to_string(info.element_count) + " " + dtype_name(dtype) +
                                                     "), the buffer " + std::to_string(bytes));
    if (!data && bytes != 0) return fail(QFLOW_RT_ERROR_NULL_POINTER, "qflow_rt: output data is NULL");
    if (!context->has_result)
      return fail(QFLOW_RT_ERROR_NOT_READY, "qflow_rt: the context has no results (no successful qflow_rt_context_run)");
    if (dtype == QFLOW_RT_FLOAT32) {
      const std::vector<float>& r = context->outputs[index];
      if (r.size() != info.element_count)
        return fail(QFLOW_RT_ERROR_INTERNAL, "qflow_rt: output " + std::to_string(index) + " has " +
                                                 std::to_string(r.size()) + " elements, expected " +
                                                 std::to_string(info.element_count));
      if (!r.empty()) std::memcpy(data, r.data(), r.size() * sizeof(float));
      return ok();
    }
    const qflow::lowered::IntBuffer& r = context->raw[index].ints;
    if (r.size() != info.element_count)
      return fail(QFLOW_RT_ERROR_INTERNAL, "qflow_rt: raw output " + std::to_string(index) + " has " +
                                               std::to_string(r.size()) + " elements, expected " +
                                               std::to_string(info.element_count));
    switch (dtype) {
      case QFLOW_RT_INT8: narrow<int8_t>(r, data); break;
      case QFLOW_RT_UINT8: narrow<uint8_t>(r, data); break;
      case QFLOW_RT_INT16: narrow<int16_t>(r, data); break;
      default: narrow<uint16_t>(r, data); break;
    }
    return ok();
  });
}

}  // extern "C"
