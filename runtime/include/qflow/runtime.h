/* qflow runtime C API: load a .hbm, query its inputs and outputs, run it. Implemented by
 * libqflow_runtime, which needs neither protobuf, ONNX nor the compiler. Every function that
 * can fail returns a qflow_rt_status: 0 on success; otherwise qflow_rt_last_error() gives a
 * one-line message (per thread). A model handle may be run from one thread at a time. */
#ifndef QFLOW_RUNTIME_H
#define QFLOW_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int qflow_rt_status;
#define QFLOW_RT_OK 0
#define QFLOW_RT_ERROR 1

typedef struct qflow_rt_model qflow_rt_model;

/* Element types; values equal the .hbm dtype codes. */
typedef enum qflow_rt_dtype {
  QFLOW_RT_FLOAT32 = 1,
  QFLOW_RT_INT8 = 2,
  QFLOW_RT_UINT8 = 3,
  QFLOW_RT_INT16 = 4,
  QFLOW_RT_UINT16 = 5
} qflow_rt_dtype;

typedef struct qflow_rt_tensor_info {
  const char* name;       /* valid while the model lives */
  size_t rank;
  const int64_t* shape;   /* rank entries */
  size_t element_count;
  /* For inputs: the quantized form run_quantized accepts (dtype FLOAT32 when the input only
   * takes floats); for outputs: FLOAT32. */
  qflow_rt_dtype quantized_dtype;
  float scale;
  int32_t zero_point;
} qflow_rt_tensor_info;

/* The message of the calling thread's last failure ("" when none). */
const char* qflow_rt_last_error(void);

/* Loads and validates a whole file (every offset, size and checksum). */
qflow_rt_status qflow_rt_load_file(const char* path, qflow_rt_model** model);
/* The same from memory; the bytes are copied. */
qflow_rt_status qflow_rt_load_memory(const void* data, size_t size, qflow_rt_model** model);
void qflow_rt_free(qflow_rt_model* model);

/* Platform name the file was compiled for. */
const char* qflow_rt_platform(const qflow_rt_model* model);
size_t qflow_rt_input_count(const qflow_rt_model* model);
size_t qflow_rt_output_count(const qflow_rt_model* model);
qflow_rt_status qflow_rt_input_info(const qflow_rt_model* model, size_t index, qflow_rt_tensor_info* info);
qflow_rt_status qflow_rt_output_info(const qflow_rt_model* model, size_t index, qflow_rt_tensor_info* info);

/* inputs[i] holds element_count floats of input i; outputs[i] receives element_count floats
 * of output i. */
qflow_rt_status qflow_rt_run(qflow_rt_model* model, const float* const* inputs, float* const* outputs);
/* inputs[i] holds input i in its quantized_dtype (int8_t, uint8_t, int16_t or uint16_t
 * elements), or floats for an input whose quantized_dtype is FLOAT32. */
qflow_rt_status qflow_rt_run_quantized(qflow_rt_model* model, const void* const* inputs, float* const* outputs);

#ifdef __cplusplus
}
#endif

#endif /* QFLOW_RUNTIME_H */
