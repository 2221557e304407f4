/* Compiles sdk/include/qflow/runtime.h as C and calls every function, so a C++-only construct
 * in the header breaks the build. Run with a .hbm path it loads the file, prints its inputs
 * and outputs and runs it on zeros. */
#include <stdio.h>
#include <stdlib.h>

#include "qflow/runtime.h"

int main(int argc, char** argv) {
  qflow_rt_model* model = NULL;
  if (qflow_rt_load_memory("not a model", 11, &model) == QFLOW_RT_OK) return 1;
  printf("expected error: %s\n", qflow_rt_last_error());
  if (argc < 2) return 0;
  if (qflow_rt_load_file(argv[1], &model) != QFLOW_RT_OK) {
    fprintf(stderr, "%s\n", qflow_rt_last_error());
    return 1;
  }
  printf("platform %s\n", qflow_rt_platform(model));
  size_t n_in = qflow_rt_input_count(model), n_out = qflow_rt_output_count(model);
  float** inputs = calloc(n_in + 1, sizeof(float*));
  float** outputs = calloc(n_out + 1, sizeof(float*));
  int status = 0;
  for (size_t i = 0; i < n_in; ++i) {
    qflow_rt_tensor_info info;
    if (qflow_rt_input_info(model, i, &info) != QFLOW_RT_OK) status = 1;
    printf("input %s rank %zu elements %zu dtype %d\n", info.name, info.rank, info.element_count,
           (int)info.quantized_dtype);
    inputs[i] = calloc(info.element_count + 1, sizeof(float));
  }
  for (size_t i = 0; i < n_out; ++i) {
    qflow_rt_tensor_info info;
    if (qflow_rt_output_info(model, i, &info) != QFLOW_RT_OK) status = 1;
    printf("output %s rank %zu elements %zu\n", info.name, info.rank, info.element_count);
    outputs[i] = calloc(info.element_count + 1, sizeof(float));
  }
  if (qflow_rt_run(model, (const float* const*)inputs, outputs) != QFLOW_RT_OK) status = 1;
  if (status == 0 && qflow_rt_run_quantized(model, (const void* const*)inputs, outputs) != QFLOW_RT_OK) {
    /* Zero floats are also valid quantized buffers of any width, so this succeeds too. */
    status = 1;
  }
  if (status) fprintf(stderr, "%s\n", qflow_rt_last_error());
  for (size_t i = 0; i < n_in; ++i) free(inputs[i]);
  for (size_t i = 0; i < n_out; ++i) free(outputs[i]);
  free(inputs);
  free(outputs);
  qflow_rt_free(model);
  return status;
}
