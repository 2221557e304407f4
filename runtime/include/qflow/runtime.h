/* qflow runtime C API: load a .hbm, query its inputs and outputs, run it. Implemented by
 * libqflow_runtime, which needs neither protobuf, ONNX nor the compiler; docs/deploying.md
 * walks through it.
 *
 * Errors. Every function that can fail returns a qflow_rt_status: QFLOW_RT_OK (0) on success,
 * otherwise one of the QFLOW_RT_ERROR_* codes below; qflow_rt_status_string(code) names a
 * code and qflow_rt_last_error() gives the calling thread's one-line message about its last
 * failure (a success clears it). No function aborts or throws on misuse: NULL handles and
 * buffers, indices out of range, wrong element types and sizes, handles already freed (as far
 * as the library can tell: it keeps the set of live handles) return a code and a message.
 *
 * Threads. A model is immutable once loaded: any number of threads may query it, create
 * contexts from it and run it at once. A context (qflow_rt_context) holds the inputs, the
 * outputs and the scratch memory of one run at a time: give each thread its own context.
 * Contexts of one model run in parallel and give the same bits as a single-threaded run.
 * A context that is used by two threads at once returns QFLOW_RT_ERROR_BUSY to the second.
 *
 * Lifetimes. qflow_rt_free may be called while contexts of the model live: they keep what
 * they need, and the model's memory goes with the last of them. Strings and shapes a
 * qflow_rt_tensor_info points to stay valid while the model handle lives. */
#ifndef QFLOW_RUNTIME_H
#define QFLOW_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A qflow_rt_status_code value. */
typedef int qflow_rt_status;

typedef enum qflow_rt_status_code {
  QFLOW_RT_OK = 0,
  /* An argument is out of its range: an input or output index, a dtype value the call does
   * not know. */
  QFLOW_RT_ERROR_INVALID_ARGUMENT = 1,
  /* A required pointer (handle, buffer, output pointer, path) is NULL. */
  QFLOW_RT_ERROR_NULL_POINTER = 2,
  /* A handle that is not a live model or context of this library (freed already, or never
   * one): detected through the library's set of live handles. */
  QFLOW_RT_ERROR_INVALID_HANDLE = 3,
  /* The operating system refused to open or read a file. */
  QFLOW_RT_ERROR_IO = 4,
  /* The bytes are not a valid .hbm: bad magic, truncated, a checksum mismatch, an offset,
   * size or op stream that does not hold together. */
  QFLOW_RT_ERROR_BAD_FORMAT = 5,
  /* A .hbm of a format version this runtime does not read (built by a newer or an older
   * toolchain). */
  QFLOW_RT_ERROR_UNSUPPORTED_VERSION = 6,
  /* A buffer's size does not match the tensor's element count times the element size. */
  QFLOW_RT_ERROR_SHAPE_MISMATCH = 7,
  /* A dtype the tensor does not take or give (a raw output of an output computed in float,
   * a quantized input in another type than quantized_dtype). */
  QFLOW_RT_ERROR_WRONG_DTYPE = 8,
  /* An allocation failed. */
  QFLOW_RT_ERROR_OUT_OF_MEMORY = 9,
  /* A call out of order: an output read before the context ran, a run before every input
   * of the context was set. */
  QFLOW_RT_ERROR_NOT_READY = 10,
  /* The context is running in another thread. */
  QFLOW_RT_ERROR_BUSY = 11,
  /* A bug in the runtime: an invariant did not hold. The message says which. */
  QFLOW_RT_ERROR_INTERNAL = 12
} qflow_rt_status_code;

typedef struct qflow_rt_model qflow_rt_model;
typedef struct qflow_rt_context qflow_rt_context;

/* Element types; values equal the .hbm dtype codes. */
typedef enum qflow_rt_dtype {
  QFLOW_RT_FLOAT32 = 1, /* float */
  QFLOW_RT_INT8 = 2,    /* int8_t */
  QFLOW_RT_UINT8 = 3,   /* uint8_t */
  QFLOW_RT_INT16 = 4,   /* int16_t */
  QFLOW_RT_UINT16 = 5   /* uint16_t */
} qflow_rt_dtype;

typedef struct qflow_rt_tensor_info {
  const char* name;     /* valid while the model lives */
  size_t rank;
  const int64_t* shape; /* rank entries */
  size_t element_count;
  /* The tensor's raw (device) form and its parameters, real = scale * (q - zero_point).
   * Inputs: the quantized form the input may be given in (qflow_rt_run_quantized, or
   * qflow_rt_context_set_input with this dtype); FLOAT32 (scale 1, zero point 0) when the
   * input only takes floats.
   * Outputs: the integers the device computes before the final dequantize (read them with
   * qflow_rt_context_get_output and this dtype); FLOAT32 when the output is computed in float
   * on the CPU and has no raw form. `scale` is rounded to float; the runtime's own
   * dequantize computes in double with the file's scale, which can differ in the last bit. */
  qflow_rt_dtype quantized_dtype;
  float scale;
  int32_t zero_point;
} qflow_rt_tensor_info;

/* --- errors ------------------------------------------------------------------------------ */

/* The message of the calling thread's last failure ("" when the last call succeeded). */
const char* qflow_rt_last_error(void);
/* A static name for a status code ("ok", "invalid argument", ...); "unknown status" for a
 * value that is not a code. */
const char* qflow_rt_status_string(qflow_rt_status code);
/* Bytes per element of a dtype; 0 for a value that is not a qflow_rt_dtype. */
size_t qflow_rt_dtype_size(qflow_rt_dtype dtype);

/* --- models -------------------------------------------------------------------------------- */

/* Loads and validates a whole file (every offset, size and checksum). On failure *model is
 * set to NULL. Codes: NULL_POINTER, IO, BAD_FORMAT, UNSUPPORTED_VERSION, OUT_OF_MEMORY. */
qflow_rt_status qflow_rt_load_file(const char* path, qflow_rt_model** model);
/* The same from memory; the bytes are copied. */
qflow_rt_status qflow_rt_load_memory(const void* data, size_t size, qflow_rt_model** model);
/* Releases the handle (NULL is ignored; a handle that is not live is ignored and sets
 * qflow_rt_last_error). Contexts created from it keep working until they are freed. */
void qflow_rt_free(qflow_rt_model* model);

/* Platform name the file was compiled for ("" for a handle that is not a live model). */
const char* qflow_rt_platform(const qflow_rt_model* model);
/* Counts (0 for a handle that is not a live model). */
size_t qflow_rt_input_count(const qflow_rt_model* model);
size_t qflow_rt_output_count(const qflow_rt_model* model);
/* Describes input or output `index`. Codes: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT
 * (index out of range). */
qflow_rt_status qflow_rt_input_info(const qflow_rt_model* model, size_t index, qflow_rt_tensor_info* info);
qflow_rt_status qflow_rt_output_info(const qflow_rt_model* model, size_t index, qflow_rt_tensor_info* info);

/* One-call runs on the model itself, safe from any number of threads (each thread reuses
 * its own scratch memory). inputs[i] holds element_count floats of input i; outputs[i]
 * receives element_count floats (dequantized) of output i. Codes: NULL_POINTER,
 * INVALID_HANDLE, OUT_OF_MEMORY, INTERNAL. */
qflow_rt_status qflow_rt_run(qflow_rt_model* model, const float* const* inputs, float* const* outputs);
/* inputs[i] holds input i in its quantized_dtype (int8_t, uint8_t, int16_t or uint16_t
 * elements), or floats for an input whose quantized_dtype is FLOAT32. */
qflow_rt_status qflow_rt_run_quantized(qflow_rt_model* model, const void* const* inputs, float* const* outputs);

/* --- contexts ------------------------------------------------------------------------------ */

/* A context of `model`: its own input, output and scratch buffers (the scratch grows to its
 * size at the first run and is reused by every later one). Codes: NULL_POINTER,
 * INVALID_HANDLE, OUT_OF_MEMORY. */
qflow_rt_status qflow_rt_context_create(const qflow_rt_model* model, qflow_rt_context** context);
/* Releases the context (NULL is ignored). */
void qflow_rt_context_free(qflow_rt_context* context);

/* Copies input `index` into the context: `dtype` FLOAT32 with element_count floats, or the
 * input's quantized_dtype with element_count integers of that type; `bytes` is the size of
 * `data` and must equal element_count * qflow_rt_dtype_size(dtype). Codes: NULL_POINTER,
 * INVALID_HANDLE, INVALID_ARGUMENT (index), WRONG_DTYPE, SHAPE_MISMATCH, BUSY. */
qflow_rt_status qflow_rt_context_set_input(qflow_rt_context* context, size_t index, qflow_rt_dtype dtype,
                                           const void* data, size_t bytes);
/* Runs the model on the inputs set (each must have been set once; they stay set for the
 * next run). Codes: INVALID_HANDLE, NULL_POINTER, NOT_READY (an input not set), BUSY,
 * OUT_OF_MEMORY, INTERNAL. */
qflow_rt_status qflow_rt_context_run(qflow_rt_context* context);
/* Copies output `index` of the last successful run: `dtype` FLOAT32 gives the dequantized
 * floats; the output's quantized_dtype (qflow_rt_output_info) gives the raw integers the
 * device computed, real = scale * (q - zero_point). `bytes` must equal element_count *
 * qflow_rt_dtype_size(dtype). Codes: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (index),
 * WRONG_DTYPE (a raw dtype the output does not have), SHAPE_MISMATCH, NOT_READY (no run
 * yet), BUSY. */
qflow_rt_status qflow_rt_context_get_output(const qflow_rt_context* context, size_t index, qflow_rt_dtype dtype,
                                            void* data, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* QFLOW_RUNTIME_H */
