/* A device application built against the installed runtime alone (tests/runtime/runtime_standalone.sh):
 * loads MODEL.hbm, runs it on the float32 input of X.npy and compares the output bitwise with
 * Y.npy, which the C++ executor produced. Prints what it found; exits 1 on any difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow/runtime.h"

/* The float32 payload of a little-endian .npy file (versions 1 to 3), or NULL. */
static float* read_npy_f32(const char* path, size_t* count) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char head[12];
  float* values = NULL;
  if (fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, "\x93NUMPY", 6) == 0) {
    const long header_len = head[6] == 1 ? (long)(head[8] | head[9] << 8)
                                         : (long)(head[8] | head[9] << 8 | (long)head[10] << 16 | (long)head[11] << 24);
    const long data_at = (head[6] == 1 ? 10 : 12) + header_len;
    char* header = calloc((size_t)header_len + 1, 1);
    fseek(f, head[6] == 1 ? 10 : 12, SEEK_SET);
    if (header && fread(header, 1, (size_t)header_len, f) == (size_t)header_len && strstr(header, "'<f4'") &&
        fseek(f, 0, SEEK_END) == 0) {
      const long bytes = ftell(f) - data_at;
      *count = (size_t)bytes / sizeof(float);
      values = malloc((size_t)bytes + 1);
      fseek(f, data_at, SEEK_SET);
      if (values && fread(values, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(values);
        values = NULL;
      }
    }
    free(header);
  }
  fclose(f);
  return values;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: standalone_app MODEL.hbm X.npy Y.npy\n");
    return 2;
  }
  size_t x_count = 0, y_count = 0;
  float* x = read_npy_f32(argv[2], &x_count);
  float* y_expected = read_npy_f32(argv[3], &y_count);
  if (!x || !y_expected) {
    fprintf(stderr, "cannot read %s or %s as float32 .npy\n", argv[2], argv[3]);
    return 1;
  }
  qflow_rt_model* model = NULL;
  if (qflow_rt_load_file(argv[1], &model) != QFLOW_RT_OK) {
    fprintf(stderr, "%s\n", qflow_rt_last_error());
    return 1;
  }
  qflow_rt_tensor_info in, out;
  if (qflow_rt_input_count(model) != 1 || qflow_rt_output_count(model) != 1 ||
      qflow_rt_input_info(model, 0, &in) != QFLOW_RT_OK || qflow_rt_output_info(model, 0, &out) != QFLOW_RT_OK ||
      in.element_count != x_count || out.element_count != y_count) {
    fprintf(stderr, "the model does not take %zu values to %zu\n", x_count, y_count);
    return 1;
  }
  printf("platform %s\n", qflow_rt_platform(model));
  printf("input %s: %zu values\n", in.name, in.element_count);
  float* y = calloc(y_count + 1, sizeof(float));
  const float* inputs[1] = {x};
  float* outputs[1] = {y};
  if (qflow_rt_run(model, inputs, outputs) != QFLOW_RT_OK) {
    fprintf(stderr, "%s\n", qflow_rt_last_error());
    return 1;
  }
  size_t differing = 0;
  for (size_t i = 0; i < y_count; ++i) differing += memcmp(&y[i], &y_expected[i], sizeof(float)) != 0;
  printf("output %s: %zu values, %zu differ from the reference\n", out.name, y_count, differing);
  qflow_rt_free(model);
  free(x);
  free(y);
  free(y_expected);
  return differing != 0;
}
