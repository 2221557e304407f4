/* ocr_line: reads one line of text with a PP-OCR recogniser compiled to .hbm, on the qflow
 * runtime C API (docs/deploying.md).
 *
 *   ocr_line REC.hbm DICT.txt IMAGE [--save-input X.npy]
 *
 * IMAGE is a crop of one text line (PNG, JPEG, ...: stb_image). It is prepared as PaddleOCR's
 * resize_norm_img does for the recogniser's input [1, 3, H, W] (H = 48 for PP-OCRv4): height
 * scaled to H keeping the aspect ratio, width ceil(H * w / h) up to W (wider lines are
 * squeezed), bilinear, RGB channels in order, (pixel / 255 - 0.5) / 0.5, the right side padded
 * with 0. The output [1, T, C] holds C class scores per time step; the greedy CTC decode takes
 * the best class per step, merges repeats and drops the blank (class 0). Class i >= 1 is line
 * i of DICT.txt (ppocr_keys_v1.txt of the model package), and the class after the last line
 * is the space.
 *
 * When the output has a raw form (qflow_rt_output_info: quantized_dtype), the decode reads the
 * device's integers directly: with a positive scale, the best integer is the best score, so
 * no dequantize is needed. The text is printed as one UTF-8 line.
 *
 * Build against an installed runtime:
 *   cc ocr_line.c $(pkg-config --cflags --libs qflow-runtime) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>

#include "qflow/runtime.h"

static int fail(const char* what) {
  fprintf(stderr, "ocr_line: %s\n", what);
  return 1;
}

static int fail_rt(const char* call, qflow_rt_status status) {
  fprintf(stderr, "ocr_line: %s: %s (%s)\n", call, qflow_rt_last_error(), qflow_rt_status_string(status));
  return 1;
}

/* The dictionary's lines (without their newlines), or NULL. */
static char** read_lines(const char* path, size_t* count) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 8192, n = 0;
  char** lines = malloc(cap * sizeof(char*));
  char buffer[1024];
  while (lines && fgets(buffer, sizeof buffer, f)) {
    size_t len = strlen(buffer);
    while (len && (buffer[len - 1] == '\n' || buffer[len - 1] == '\r')) buffer[--len] = '\0';
    if (n == cap) {
      char** grown = realloc(lines, (cap *= 2) * sizeof(char*));
      if (!grown) break;
      lines = grown;
    }
    lines[n] = malloc(len + 1);
    if (!lines[n]) break;
    memcpy(lines[n++], buffer, len + 1);
  }
  fclose(f);
  *count = n;
  return lines;
}

/* Bilinear resize as PIL's Image.resize(BILINEAR) does when it enlarges; for reductions PIL
 * widens its filter, which this simple version does not (the decode rarely notices). */
static float sample(const unsigned char* src, int sw, int sh, int c, float fx, float fy) {
  if (fx < 0) fx = 0;
  if (fy < 0) fy = 0;
  int x0 = (int)fx, y0 = (int)fy;
  if (x0 > sw - 1) x0 = sw - 1;
  if (y0 > sh - 1) y0 = sh - 1;
  const int x1 = x0 + 1 < sw ? x0 + 1 : sw - 1, y1 = y0 + 1 < sh ? y0 + 1 : sh - 1;
  const float wx = fx - (float)x0, wy = fy - (float)y0;
  const float a = src[((size_t)y0 * sw + x0) * 3 + c], b = src[((size_t)y0 * sw + x1) * 3 + c];
  const float d = src[((size_t)y1 * sw + x0) * 3 + c], e = src[((size_t)y1 * sw + x1) * 3 + c];
  const float top = a + (b - a) * wx, bottom = d + (e - d) * wx;
  return top + (bottom - top) * wy;
}

static int write_npy_f32(const char* path, const qflow_rt_tensor_info* info, const float* data) {
  char header[256];
  int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
  for (size_t i = 0; i < info->rank; ++i)
    n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", (long long)info->shape[i],
                  i + 1 < info->rank ? " " : "");
  n += snprintf(header + n, sizeof header - (size_t)n, "), }");
  while ((10 + n + 1) % 64) header[n++] = ' ';
  header[n++] = '\n';
  FILE* f = fopen(path, "wb");
  if (!f) return 0;
  const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
  int ok = fwrite(magic, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n &&
           fwrite(data, sizeof(float), info->element_count, f) == info->element_count;
  return fclose(f) == 0 && ok;
}

int main(int argc, char** argv) {
  const char *model_path = NULL, *dict_path = NULL, *image_path = NULL, *save_input = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--save-input") && i + 1 < argc) save_input = argv[++i];
    else if (argv[i][0] == '-') return fail("usage: ocr_line REC.hbm DICT.txt IMAGE [--save-input X.npy]");
    else if (!model_path) model_path = argv[i];
    else if (!dict_path) dict_path = argv[i];
    else if (!image_path) image_path = argv[i];
  }
  if (!image_path) return fail("usage: ocr_line REC.hbm DICT.txt IMAGE [--save-input X.npy]");
  size_t dict_size = 0;
  char** dict = read_lines(dict_path, &dict_size);
  if (!dict || dict_size == 0) return fail("cannot read the dictionary");

  qflow_rt_model* model = NULL;
  qflow_rt_status status = qflow_rt_load_file(model_path, &model);
  if (status != QFLOW_RT_OK) return fail_rt("load", status);
  qflow_rt_tensor_info in, out;
  if ((status = qflow_rt_input_info(model, 0, &in)) != QFLOW_RT_OK) return fail_rt("input 0", status);
  if ((status = qflow_rt_output_info(model, 0, &out)) != QFLOW_RT_OK) return fail_rt("output 0", status);
  if (in.rank != 4 || in.shape[0] != 1 || in.shape[1] != 3) return fail("the recogniser's input is not [1, 3, H, W]");
  if (out.rank != 3 || out.shape[0] != 1) return fail("the recogniser's output is not [1, T, C]");
  const int height = (int)in.shape[2], width = (int)in.shape[3];
  const size_t steps = (size_t)out.shape[1], classes = (size_t)out.shape[2];
  if (classes != dict_size + 2) {
    fprintf(stderr, "ocr_line: the model has %zu classes, the dictionary %zu lines (expected classes = lines + 2)\n",
            classes, dict_size);
    return 1;
  }

  int iw = 0, ih = 0, ic = 0;
  unsigned char* rgb = stbi_load(image_path, &iw, &ih, &ic, 3);
  if (!rgb) {
    fprintf(stderr, "ocr_line: %s: %s\n", image_path, stbi_failure_reason());
    return 1;
  }
  int resized_w = (int)(((long long)height * iw + ih - 1) / ih);  /* ceil(H * w / h) */
  if (resized_w > width) resized_w = width;
  if (resized_w < 1) resized_w = 1;
  float* x = calloc(in.element_count, sizeof(float));
  if (!x) return fail("out of memory");
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < height; ++y)
      for (int xx = 0; xx < resized_w; ++xx) {
        const float fx = ((float)xx + 0.5f) * (float)iw / (float)resized_w - 0.5f;
        const float fy = ((float)y + 0.5f) * (float)ih / (float)height - 0.5f;
        const float p = (float)(int)(sample(rgb, iw, ih, c, fx, fy) + 0.5f);  /* an 8-bit image, as PIL's */
        x[((size_t)c * height + y) * width + xx] = (p / 255.0f - 0.5f) / 0.5f;
      }
  stbi_image_free(rgb);
  if (save_input && !write_npy_f32(save_input, &in, x)) return fail("cannot write --save-input");

  qflow_rt_context* ctx = NULL;
  if ((status = qflow_rt_context_create(model, &ctx)) != QFLOW_RT_OK) return fail_rt("context", status);
  if ((status = qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x, in.element_count * sizeof(float))) != QFLOW_RT_OK)
    return fail_rt("set input", status);
  if ((status = qflow_rt_context_run(ctx)) != QFLOW_RT_OK) return fail_rt("run", status);

  /* Best class per step, on the raw integers when there are some (positive scale: same order). */
  size_t* best = malloc(steps * sizeof(size_t));
  const int raw = out.quantized_dtype != QFLOW_RT_FLOAT32 && out.scale > 0;
  const size_t elem = raw ? qflow_rt_dtype_size(out.quantized_dtype) : sizeof(float);
  void* scores = malloc(out.element_count * elem);
  if (!best || !scores) return fail("out of memory");
  status = qflow_rt_context_get_output(ctx, 0, raw ? out.quantized_dtype : QFLOW_RT_FLOAT32, scores,
                                       out.element_count * elem);
  if (status != QFLOW_RT_OK) return fail_rt("output", status);
  for (size_t t = 0; t < steps; ++t) {
    size_t arg = 0;
    double top = 0;
    for (size_t k = 0; k < classes; ++k) {
      const size_t i = t * classes + k;
      double v;
      switch (raw ? out.quantized_dtype : QFLOW_RT_FLOAT32) {
        case QFLOW_RT_INT8: v = ((const int8_t*)scores)[i]; break;
        case QFLOW_RT_UINT8: v = ((const uint8_t*)scores)[i]; break;
        case QFLOW_RT_INT16: v = ((const int16_t*)scores)[i]; break;
        case QFLOW_RT_UINT16: v = ((const uint16_t*)scores)[i]; break;
        default: v = ((const float*)scores)[i]; break;
      }
      if (k == 0 || v > top) arg = k, top = v;
    }
    best[t] = arg;
  }
  /* Greedy CTC: merge repeats, drop blanks. */
  for (size_t t = 0; t < steps; ++t) {
    if (best[t] == 0 || (t > 0 && best[t] == best[t - 1])) continue;
    fputs(best[t] <= dict_size ? dict[best[t] - 1] : " ", stdout);
  }
  fputc('\n', stdout);

  qflow_rt_context_free(ctx);
  qflow_rt_free(model);
  for (size_t i = 0; i < dict_size; ++i) free(dict[i]);
  free(dict);
  free(best);
  free(scores);
  free(x);
  return 0;
}
