/* classify_image: an image classifier on the qflow runtime C API (docs/deploying.md).
 *
 *   classify_image MODEL.hbm IMAGE [--mean M[,M,M]] [--std S[,S,S]] [--format F] [--top K]
 *                  [--threads N] [--save-input X.npy]
 *
 * Reads IMAGE (PNG, JPEG, BMP, ...: stb_image), brings it to the model's input 0 and prints
 * the K (default 5) highest scores of output 0 with their class index.
 *
 * How the image becomes the input depends on what qflow_rt_input_info reports:
 * - a float (featuremap) input of shape [N, C, H, W] (or [N, H, W, C] when the last axis is
 *   1 or 3 and the second is not): the image is resized (bilinear, pixel centres aligned) to
 *   H x W, turned into gray (C = 1, BT.601 luma) or RGB (C = 3), and each value becomes
 *   (pixel / 255 - mean[c]) / std[c] in float, the usual torchvision/PaddleOCR normalisation.
 *   --mean and --std take one value or one per channel; defaults 0 and 1 (pixel / 255).
 * - a UINT8 camera input (the device converts and normalises it itself): the image is resized
 *   and written as the model's pixel format: NV12 for [N, H*3/2, W], gray for [N, H, W, 1]
 *   or [N, 1, H, W], RGB for [N, H, W, 3] or planes [N, 3, H, W]. --format nv12|gray|rgb|float
 *   overrides the guess (a rank-3 UINT8 input is NV12 when its second axis is a multiple of
 *   3, gray otherwise).
 *   RGB -> NV12 is BT.601 full range (JPEG's YCbCr):
 *       Y  =  0.299 R + 0.587 G + 0.114 B
 *       Cb = -0.168736 R - 0.331264 G + 0.5 B + 128
 *       Cr =  0.5 R - 0.418688 G - 0.081312 B + 128
 *   rounded to nearest and clamped to [0, 255]; Cb and Cr are the means of each 2x2 block,
 *   stored after the H x W luma plane as H/2 rows of W/2 (Cb, Cr) pairs.
 *
 * Scores are printed as the runtime dequantizes them, with the raw integer the device computed
 * when the output has one (qflow_rt_output_info: quantized_dtype). --threads N classifies the
 * image on N threads at once, each with its own context, and checks they agree (a demonstration
 * of one model shared by many contexts). --save-input writes the input array as .npy.
 *
 * Build against an installed runtime:
 *   cc classify_image.c $(pkg-config --cflags --libs qflow-runtime) -lpthread
 * stb_image is compiled in from Debian's libstb-dev header (/usr/include/stb/stb_image.h). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
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

enum format { FORMAT_AUTO, FORMAT_FLOAT, FORMAT_NV12, FORMAT_GRAY, FORMAT_RGB };

static int fail(const char* what) {
  fprintf(stderr, "classify_image: %s\n", what);
  return 1;
}

static int fail_rt(const char* call, qflow_rt_status status) {
  fprintf(stderr, "classify_image: %s: %s (%s)\n", call, qflow_rt_last_error(), qflow_rt_status_string(status));
  return 1;
}

/* Up to 3 comma-separated floats; the count read, 0 on a syntax error. */
static int parse_floats(const char* text, float* out) {
  int n = 0;
  while (n < 3) {
    char* end = NULL;
    out[n++] = strtof(text, &end);
    if (end == text) return 0;
    if (*end == '\0') return n;
    if (*end != ',') return 0;
    text = end + 1;
  }
  return 0;
}

/* Bilinear resize of an 8-bit image with `channels` interleaved channels (pixel centres
 * aligned, edges clamped); the result keeps the channel count. */
static unsigned char* resize(const unsigned char* src, int sw, int sh, int channels, int dw, int dh) {
  unsigned char* dst = malloc((size_t)dw * (size_t)dh * (size_t)channels);
  if (!dst) return NULL;
  for (int y = 0; y < dh; ++y) {
    float fy = ((float)y + 0.5f) * (float)sh / (float)dh - 0.5f;
    if (fy < 0) fy = 0;
    int y0 = (int)fy;
    if (y0 > sh - 1) y0 = sh - 1;
    const int y1 = y0 + 1 < sh ? y0 + 1 : sh - 1;
    const float wy = fy - (float)y0;
    for (int x = 0; x < dw; ++x) {
      float fx = ((float)x + 0.5f) * (float)sw / (float)dw - 0.5f;
      if (fx < 0) fx = 0;
      int x0 = (int)fx;
      if (x0 > sw - 1) x0 = sw - 1;
      const int x1 = x0 + 1 < sw ? x0 + 1 : sw - 1;
      const float wx = fx - (float)x0;
      for (int c = 0; c < channels; ++c) {
        const float a = src[((size_t)y0 * sw + x0) * channels + c], b = src[((size_t)y0 * sw + x1) * channels + c];
        const float d = src[((size_t)y1 * sw + x0) * channels + c], e = src[((size_t)y1 * sw + x1) * channels + c];
        const float v = (a + (b - a) * wx) + ((d + (e - d) * wx) - (a + (b - a) * wx)) * wy;
        dst[((size_t)y * dw + x) * channels + c] = (unsigned char)(v + 0.5f);
      }
    }
  }
  return dst;
}

static unsigned char clamp_u8(float v) {
  if (v <= 0.0f) return 0;
  if (v >= 255.0f) return 255;
  return (unsigned char)(v + 0.5f);
}

static float luma(const unsigned char* rgb) {
  return 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
}

/* RGB (interleaved, w x h, both even) -> NV12, BT.601 full range (see the file comment). */
static void rgb_to_nv12(const unsigned char* rgb, int w, int h, unsigned char* nv12) {
  unsigned char* uv = nv12 + (size_t)w * h;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) nv12[(size_t)y * w + x] = clamp_u8(luma(rgb + ((size_t)y * w + x) * 3));
  for (int y = 0; y < h / 2; ++y)
    for (int x = 0; x < w / 2; ++x) {
      float r = 0, g = 0, b = 0;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          const unsigned char* p = rgb + ((size_t)(2 * y + dy) * w + (2 * x + dx)) * 3;
          r += p[0], g += p[1], b += p[2];
        }
      r /= 4, g /= 4, b /= 4;
      uv[(size_t)y * w + 2 * x] = clamp_u8(-0.168736f * r - 0.331264f * g + 0.5f * b + 128.0f);
      uv[(size_t)y * w + 2 * x + 1] = clamp_u8(0.5f * r - 0.418688f * g - 0.081312f * b + 128.0f);
    }
}

/* Writes `info->element_count` elements of `data` (float32 or uint8) as .npy in `info`'s shape. */
static int write_npy(const char* path, const qflow_rt_tensor_info* info, const void* data, qflow_rt_dtype dtype) {
  char header[256];
  int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   dtype == QFLOW_RT_UINT8 ? "|u1" : "<f4");
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
           fwrite(data, dtype == QFLOW_RT_UINT8 ? 1 : sizeof(float), info->element_count, f) == info->element_count;
  return fclose(f) == 0 && ok;
}

struct job {
  const qflow_rt_model* model;
  qflow_rt_dtype dtype;
  const void* input;
  size_t input_bytes;
  float* scores;
  size_t count;
  qflow_rt_status status;
};

/* One classification on its own context: what each thread of an application does. */
static void* classify(void* arg) {
  struct job* job = arg;
  qflow_rt_context* ctx = NULL;
  job->status = qflow_rt_context_create(job->model, &ctx);
  if (job->status == QFLOW_RT_OK) job->status = qflow_rt_context_set_input(ctx, 0, job->dtype, job->input, job->input_bytes);
  if (job->status == QFLOW_RT_OK) job->status = qflow_rt_context_run(ctx);
  if (job->status == QFLOW_RT_OK)
    job->status = qflow_rt_context_get_output(ctx, 0, QFLOW_RT_FLOAT32, job->scores, job->count * sizeof(float));
  qflow_rt_context_free(ctx);
  return NULL;
}

int main(int argc, char** argv) {
  const char *model_path = NULL, *image_path = NULL, *save_input = NULL;
  float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
  int n_mean = 1, n_std = 1, top = 5, threads = 1;
  enum format format = FORMAT_AUTO;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--mean") && v) {
      if (!(n_mean = parse_floats(v, mean))) return fail("--mean takes 1 or 3 comma-separated numbers");
      ++i;
    } else if (!strcmp(a, "--std") && v) {
      if (!(n_std = parse_floats(v, std))) return fail("--std takes 1 or 3 comma-separated numbers");
      ++i;
    } else if (!strcmp(a, "--top") && v) {
      top = atoi(v), ++i;
    } else if (!strcmp(a, "--threads") && v) {
      threads = atoi(v), ++i;
    } else if (!strcmp(a, "--save-input") && v) {
      save_input = v, ++i;
    } else if (!strcmp(a, "--format") && v) {
      format = !strcmp(v, "nv12") ? FORMAT_NV12 : !strcmp(v, "gray") ? FORMAT_GRAY : !strcmp(v, "rgb") ? FORMAT_RGB
             : !strcmp(v, "float") ? FORMAT_FLOAT : FORMAT_AUTO;
      if (format == FORMAT_AUTO) return fail("--format takes nv12, gray, rgb or float");
      ++i;
    } else if (a[0] == '-') {
      return fail("usage: classify_image MODEL.hbm IMAGE [--mean M[,M,M]] [--std S[,S,S]] [--format F] [--top K] "
                  "[--threads N] [--save-input X.npy]");
    } else if (!model_path) {
      model_path = a;
    } else if (!image_path) {
      image_path = a;
    }
  }
  if (!model_path || !image_path) return fail("usage: classify_image MODEL.hbm IMAGE [options]");
  if (top < 1 || threads < 1 || threads > 64) return fail("--top and --threads take a positive count (threads <= 64)");
  for (int c = 0; c < 3; ++c) {
    if (n_mean == 1) mean[c] = mean[0];
    if (n_std == 1) std[c] = std[0];
    if (std[c] == 0.0f) return fail("--std must not be 0");
  }

  qflow_rt_model* model = NULL;
  qflow_rt_status status = qflow_rt_load_file(model_path, &model);
  if (status != QFLOW_RT_OK) return fail_rt("load", status);
  qflow_rt_tensor_info in, out;
  if ((status = qflow_rt_input_info(model, 0, &in)) != QFLOW_RT_OK) return fail_rt("input 0", status);
  if ((status = qflow_rt_output_info(model, 0, &out)) != QFLOW_RT_OK) return fail_rt("output 0", status);

  /* What the input wants: pixel format, size and channel order. */
  if (format == FORMAT_AUTO) {
    format = FORMAT_FLOAT;
    if (in.quantized_dtype == QFLOW_RT_UINT8 && in.rank == 3) format = in.shape[1] % 3 == 0 ? FORMAT_NV12 : FORMAT_GRAY;
    if (in.quantized_dtype == QFLOW_RT_UINT8 && in.rank == 4 && in.shape[3] == 3) format = FORMAT_RGB;
    if (in.quantized_dtype == QFLOW_RT_UINT8 && in.rank == 4 && in.shape[3] == 1) format = FORMAT_GRAY;
    /* NCHW frames (input-layout-rt nchw): [N, 1, H, W] gray, [N, 3, H, W] RGB planes. */
    if (in.quantized_dtype == QFLOW_RT_UINT8 && in.rank == 4 && in.shape[3] != 1 && in.shape[3] != 3)
      format = in.shape[1] == 3 ? FORMAT_RGB : FORMAT_GRAY;
  }
  int height = 0, width = 0, channels = 1, nhwc = 0;
  if (format == FORMAT_NV12) {
    if (in.rank != 3 || in.shape[1] % 3 != 0) return fail("an NV12 input has shape [N, H*3/2, W]");
    height = (int)(in.shape[1] * 2 / 3), width = (int)in.shape[2], channels = 3;
    if (height % 2 || width % 2) return fail("NV12 needs an even height and width");
  } else if (in.rank == 3) {
    height = (int)in.shape[1], width = (int)in.shape[2];
  } else if (in.rank == 4) {
    nhwc = (in.shape[3] == 1 || in.shape[3] == 3) && in.shape[1] != 1 && in.shape[1] != 3;
    if ((format == FORMAT_RGB && in.shape[3] == 3) || (format == FORMAT_GRAY && in.shape[3] == 1)) nhwc = 1;
    channels = (int)(nhwc ? in.shape[3] : in.shape[1]);
    height = (int)(nhwc ? in.shape[1] : in.shape[2]), width = (int)(nhwc ? in.shape[2] : in.shape[3]);
  } else {
    return fail("input 0 is neither [N, C, H, W], [N, H, W, C] nor [N, H, W]");
  }
  if (channels != 1 && channels != 3) return fail("input 0 takes neither 1 nor 3 channels");
  if ((size_t)height * (size_t)width * (size_t)channels == 0 || in.shape[0] < 1)
    return fail("input 0 has an empty shape");
  if ((size_t)(format == FORMAT_NV12 ? height * width * 3 / 2 : height * width * channels) != in.element_count / (size_t)in.shape[0])
    return fail("input 0's shape does not fit the pixel format");

  int iw = 0, ih = 0, ic = 0;
  unsigned char* decoded = stbi_load(image_path, &iw, &ih, &ic, channels == 1 && format != FORMAT_NV12 ? 1 : 3);
  if (!decoded) {
    fprintf(stderr, "classify_image: %s: %s\n", image_path, stbi_failure_reason());
    return 1;
  }
  const int image_channels = channels == 1 && format != FORMAT_NV12 ? 1 : 3;
  unsigned char* pixels = resize(decoded, iw, ih, image_channels, width, height);
  stbi_image_free(decoded);
  if (!pixels) return fail("out of memory");
  printf("model %s, platform %s\n", model_path, qflow_rt_platform(model));
  printf("image %s: %dx%d -> %dx%d, input '%s' as %s\n", image_path, iw, ih, width, height, in.name,
         format == FORMAT_NV12 ? "NV12 (uint8)" : format == FORMAT_GRAY ? "gray (uint8)" : format == FORMAT_RGB ? "RGB (uint8)"
         : channels == 1 ? "gray float" : "RGB float");

  /* One sample, repeated over the batch. */
  const size_t per_sample = in.element_count / (size_t)in.shape[0];
  void* input = NULL;
  size_t input_bytes = 0;
  qflow_rt_dtype dtype = QFLOW_RT_FLOAT32;
  if (format == FORMAT_FLOAT) {
    float* x = malloc(in.element_count * sizeof(float));
    if (!x) return fail("out of memory");
    for (int c = 0; c < channels; ++c)
      for (int y = 0; y < height; ++y)
        for (int xx = 0; xx < width; ++xx) {
          const float p = (float)pixels[((size_t)y * width + xx) * channels + c];
          const float v = (p / 255.0f - mean[c]) / std[c];
          const size_t at = nhwc ? ((size_t)y * width + xx) * channels + c : ((size_t)c * height + y) * width + xx;
          x[at] = v;
        }
    for (size_t n = 1; n < (size_t)in.shape[0]; ++n) memcpy(x + n * per_sample, x, per_sample * sizeof(float));
    input = x, input_bytes = in.element_count * sizeof(float);
    if (save_input && !write_npy(save_input, &in, x, QFLOW_RT_FLOAT32)) return fail("cannot write --save-input");
  } else {
    unsigned char* u = malloc(in.element_count);
    if (!u) return fail("out of memory");
    if (format == FORMAT_NV12) {
      rgb_to_nv12(pixels, width, height, u);
    } else if (channels == 3 && !nhwc) {  /* RGB planes (NCHW) from interleaved pixels */
      for (size_t c = 0; c < 3; ++c)
        for (size_t p = 0; p < (size_t)width * (size_t)height; ++p) u[c * (size_t)width * (size_t)height + p] = pixels[p * 3 + c];
    } else {
      memcpy(u, pixels, per_sample);  /* gray, or RGB interleaved (NHWC) */
    }
    for (size_t n = 1; n < (size_t)in.shape[0]; ++n) memcpy(u + n * per_sample, u, per_sample);
    input = u, input_bytes = in.element_count, dtype = QFLOW_RT_UINT8;
    if (save_input && !write_npy(save_input, &in, u, QFLOW_RT_UINT8)) return fail("cannot write --save-input");
  }
  free(pixels);

  /* Classify on `threads` contexts at once; all must agree with the first. */
  pthread_t ids[64];
  struct job jobs[64];
  for (int t = 0; t < threads; ++t) {
    jobs[t] = (struct job){model, dtype, input, input_bytes, calloc(out.element_count + 1, sizeof(float)), out.element_count, 0};
    if (!jobs[t].scores) return fail("out of memory");
    if (pthread_create(&ids[t], NULL, classify, &jobs[t]) != 0) return fail("cannot start a thread");
  }
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
  for (int t = 0; t < threads; ++t) {
    if (jobs[t].status != QFLOW_RT_OK) return fail_rt("run", jobs[t].status);
    if (memcmp(jobs[t].scores, jobs[0].scores, out.element_count * sizeof(float)) != 0)
      return fail("contexts of one model disagree");
  }
  if (threads > 1) printf("%d contexts on %d threads agree\n", threads, threads);

  /* The raw integers, when the device computes the scores in fixed point. */
  void* raw = NULL;
  if (out.quantized_dtype != QFLOW_RT_FLOAT32) {
    qflow_rt_context* ctx = NULL;
    raw = malloc(out.element_count * qflow_rt_dtype_size(out.quantized_dtype) + 1);
    if (!raw || qflow_rt_context_create(model, &ctx) != QFLOW_RT_OK ||
        qflow_rt_context_set_input(ctx, 0, dtype, input, input_bytes) != QFLOW_RT_OK ||
        qflow_rt_context_run(ctx) != QFLOW_RT_OK ||
        qflow_rt_context_get_output(ctx, 0, out.quantized_dtype, raw,
                                    out.element_count * qflow_rt_dtype_size(out.quantized_dtype)) != QFLOW_RT_OK)
      return fail_rt("raw output", QFLOW_RT_ERROR_INTERNAL);
    qflow_rt_context_free(ctx);
  }

  /* Top K of the first sample: highest score first, lower index first on ties. */
  const float* scores = jobs[0].scores;
  const size_t classes = out.element_count / (out.rank ? (size_t)out.shape[0] : 1);
  if ((size_t)top > classes) top = (int)classes;
  char* taken = calloc(classes + 1, 1);
  printf("top-%d of '%s' (%zu classes):\n", top, out.name, classes);
  for (int r = 0; r < top; ++r) {
    size_t best = classes;
    for (size_t k = 0; k < classes; ++k)
      if (!taken[k] && (best == classes || scores[k] > scores[best])) best = k;
    taken[best] = 1;
    printf("  %d. class %zu score %.6g", r + 1, best, (double)scores[best]);
    if (raw) {
      long q = 0;
      switch (out.quantized_dtype) {
        case QFLOW_RT_INT8: q = ((const int8_t*)raw)[best]; break;
        case QFLOW_RT_UINT8: q = ((const uint8_t*)raw)[best]; break;
        case QFLOW_RT_INT16: q = ((const int16_t*)raw)[best]; break;
        default: q = ((const uint16_t*)raw)[best]; break;
      }
      printf(" (raw %ld, scale %.6g, zero point %d)", q, (double)out.scale, (int)out.zero_point);
    }
    printf("\n");
  }
  free(taken);
  free(raw);
  for (int t = 0; t < threads; ++t) free(jobs[t].scores);
  free(input);
  qflow_rt_free(model);
  return 0;
}
