// Float kernels for Conv and ConvTranspose: direct depthwise, im2col around the packed sgemm
// (float32) or an Eigen GEMM (double), a GEMM and col2im per output channel for
// ConvTranspose, bias and fused activation applied per tile while it is in cache.
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "framework/core/thread_pool.h"
#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernels/conv_gemm.h"
#include "framework/interpreter/kernels/conv_geometry.h"
#include "framework/interpreter/kernels/depthwise_conv.h"
#include "framework/interpreter/kernels/direct_conv.h"
#include "framework/interpreter/kernels/eigen_maps.h"
#include "framework/interpreter/kernels/sgemm.h"

namespace qflow {

namespace {

// Upper bound on the column buffer of one work unit, in elements: a quarter of a typical L2,
// so the panel im2col writes is still cached when the GEMM packs it.
constexpr int64_t kColumnBudget = int64_t{1} << 16;
// Narrower tiles than this make the GEMM call overhead dominate.
constexpr int64_t kMinTile = 64;
// Work units per thread a float conv aims for, so a static split stays even.
constexpr int64_t kUnitsPerThread = 4;

// Whole 16-column strips of sgemm's register tile, so only a shape's last tile has a partial
// strip. The double (Eigen) path keeps the width the shape gives, so its sums never depend on
// the thread count. sgemm's bits do not depend on how C is split, so a float conv with too
// few tiles for the pool (a 40x40 map was 3 tiles: 2 + 1 at 2 threads) narrows them.
template <typename T>
int64_t column_tile(int64_t rows, int64_t out_size, int64_t planes, int threads) {
  const int64_t budget = kColumnBudget / std::max<int64_t>(1, rows) / kSgemmNr * kSgemmNr;
  int64_t tile = std::max<int64_t>(1, std::min(out_size, std::max(kMinTile, budget)));
  if (std::is_same_v<T, float> && threads > 1 && out_size > 0) {
    const int64_t wanted = (kUnitsPerThread * threads + planes - 1) / std::max<int64_t>(1, planes);
    const int64_t even = (out_size + wanted - 1) / wanted;
    const int64_t strips = (even + kSgemmNr - 1) / kSgemmNr * kSgemmNr;
    tile = std::min(tile, std::max(std::min(out_size, kMinTile), strips));
  }
  return tile;
}

// The calling thread's scratch buffer of at least n elements, kept between calls so a
// worker allocates it once, not on every node.
template <typename T>
T* scratch(std::size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

Status check_bias(const KernelContext& context, const Tensor* bias, int64_t channels, DType dtype) {
  if (!bias) return Status::ok();
  if (bias->dtype() != dtype) return context.error("bias element type differs from the input's");
  if (bias->rank() != 1 || bias->dim(0) != channels)
    return context.error("bias shape " + shape_to_string(bias->shape()) + " should be [" + std::to_string(channels) +
                         "]");
  return Status::ok();
}

// Adds the bias and runs the fused epilogue program on `rows` rows of `count` values (pitch
// ld), row r being output channel channel + r.
template <typename T>
void finish_rows(T* data, int64_t rows, int64_t count, int64_t ld, const T* bias, const Epilogue* epilogue,
                 int64_t channel) {
  if constexpr (std::is_same_v<T, float>) {
    if (bias || epilogue) activation::finish_rows(epilogue, data, rows, count, ld, channel, bias);
  } else if (bias) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < count; ++i) data[r * ld + i] += bias[r];
  }
}

// What a conv derives from its input and weight shapes: the geometry and, for a 2-D
// depthwise conv, the plane plan.
struct ConvShapes {
  Shape x, w;
  ConvGeometry g;
  std::optional<DepthwisePlan> depthwise;

  bool is_depthwise() const { return g.in_channels_per_group() == 1 && g.group > 1 && g.rank() == 2; }
};

// `packed`: the weight packed when the kernel was made, or null; `direct`: the same weight
// in the direct kernel's strips, or null.
template <typename T>
Status run_conv(KernelContext& context, const ConvShapes& shapes, const PackedConvWeights* packed,
                const DirectConvWeights* direct) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
  const Tensor* bias = context.input(2);
  const ConvGeometry& g = shapes.g;
  QFLOW_RETURN_IF_ERROR(check_bias(context, bias, g.out_channels, x->dtype()));

  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(x->dtype(), g.column_shape()));
  const int64_t groups = g.group, cg = g.in_channels_per_group(), mg = g.out_channels_per_group();
  const int64_t k = g.kernel_size(), rows = cg * k, in_size = g.in_size(), out_size = g.out_size();
  const T* xd = x->data<T>();
  const T* wd = w->data<T>();
  const T* bd = bias ? bias->data<T>() : nullptr;
  T* yd = y.data<T>();
  const Epilogue* epilogue =
      std::is_same_v<T, float> && context.epilogue && context.epilogue->fits(y.rank(), g.out_channels)
          ? context.epilogue
          : nullptr;

  if (shapes.is_depthwise()) {
    // Depthwise: a GEMM per channel would be a 1 x k row times a k x out_size panel.
    const DepthwiseIsa isa = depthwise_best_isa();
    const DepthwisePlan& plan = *shapes.depthwise;
    context.parallel_for(g.batch * g.out_channels, 2 * k * out_size, [&](int64_t begin, int64_t end) {
      T* padded = scratch<T>(static_cast<std::size_t>(plan.scratch_size()));
      plan.clear(padded);
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t n = unit / g.out_channels, oc = unit % g.out_channels, gi = oc / mg;
        T* out = yd + unit * out_size;
        plan.plane(xd + (n * g.in_channels + gi) * in_size, wd + oc * k, out, padded, isa);
        finish_rows(out, 1, out_size, out_size, bd ? bd + oc : nullptr, epilogue, oc);
      }
    });
  } else {
    const bool pointwise = g.is_pointwise();
    // A weight fed at run time in place of the packed constant takes the unpacked path.
    const PackedConvWeights* weights = packed && packed->packs(*w) ? packed : nullptr;
    std::optional<DirectConvPlan> in_place;
    if (weights && direct && direct_conv_fits(g)) in_place.emplace(*direct, g);
    const int64_t tile = column_tile<T>(rows, out_size, g.batch * groups, context.threads ? context.threads->size() : 1);
    const int64_t tiles = out_size > 0 ? (out_size + tile - 1) / tile : 0;
    context.parallel_for(g.batch * groups * tiles, 2 * mg * rows * tile, [&](int64_t begin, int64_t end) {
      T* columns = pointwise || weights ? nullptr : scratch<T>(static_cast<std::size_t>(rows * tile));
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t n = unit / (groups * tiles), gi = (unit / tiles) % groups, t = unit % tiles;
        const int64_t col_begin = t * tile, count = std::min(out_size, col_begin + tile) - col_begin;
        const T* image = xd + (n * g.in_channels + gi * cg) * in_size;
        T* out_data = yd + (n * g.out_channels + gi * mg) * out_size + col_begin;
        if constexpr (std::is_same_v<T, float>) {
          if (in_place) {
            in_place->tile(image, col_begin, count, out_data, out_size);
          } else if (weights) {
            conv_gemm_tile(weights->group(gi), image, g, col_begin, count, out_data, out_size);
          } else {
            if (!pointwise) im2col(image, g, cg, T(0), col_begin, col_begin + count, columns);
            const T* panel = pointwise ? image + col_begin : columns;
            sgemm(mg, count, rows, wd + gi * mg * rows, rows, panel, pointwise ? in_size : count, out_data, out_size);
          }
        } else {
          if (!pointwise) im2col(image, g, cg, T(0), col_begin, col_begin + count, columns);
          const T* panel = pointwise ? image + col_begin : columns;
          matrix_view(out_data, mg, count, out_size).noalias() = matrix_view(wd + gi * mg * rows, mg, rows, rows) *
                                                                 matrix_view(panel, rows, count, pointwise ? in_size : count);
        }
        finish_rows(out_data, mg, count, out_size, bd ? bd + gi * mg : nullptr, epilogue, gi * mg);
      }
    });
  }
  if (epilogue) context.epilogue_applied = true;
  context.outputs[0] = std::move(y);
  return Status::ok();
}

// A 2-D ConvTranspose whose kernel equals its stride, unpadded and one group (the 2x
// upsampling of segmentation and detection heads): every output pixel takes exactly one
// value of W^T * X, so the product can be made for all channels at once, tile by tile of
// input positions, and scattered.
bool transposed_without_overlap(const ConvGeometry& g) {
  if (g.rank() != 2 || g.group != 1) return false;
  for (std::size_t d = 0; d < 2; ++d)
    if (g.kernel[d] != g.strides[d] || g.dilations[d] != 1 || g.pads_begin[d] != 0 ||
        g.in_spatial[d] != g.out_spatial[d] * g.strides[d])
      return false;
  return true;
}

// out[2x] = (0 + a[x]) + *bias and out[2x + 1] = (0 + b[x]) + *bias (no bias: without the
// addition) four columns at a time; returns the columns done (a multiple of four). The
// scalar loop wrote one float at a time and was 8% of a PP-OCRv4 det sensitivity ranking.
int64_t interleave_pairs(const float* a, const float* b, int64_t len, const float* bias, float* out) {
  typedef float Floats4 __attribute__((vector_size(16)));
  typedef int Lanes4 __attribute__((vector_size(16)));
  const Floats4 zero = Floats4{}, add = bias ? zero + *bias : zero;
  int64_t x = 0;
  for (; x + 4 <= len; x += 4) {
    Floats4 even, odd;
    __builtin_memcpy(&even, a + x, sizeof even);
    __builtin_memcpy(&odd, b + x, sizeof odd);
    even = zero + even;
    odd = zero + odd;
    if (bias) {
      even = even + add;
      odd = odd + add;
    }
    const Floats4 low = __builtin_shuffle(even, odd, Lanes4{0, 4, 1, 5});
    const Floats4 high = __builtin_shuffle(even, odd, Lanes4{2, 6, 3, 7});
    __builtin_memcpy(out + 2 * x, &low, sizeof low);
    __builtin_memcpy(out + 2 * x + 4, &high, sizeof high);
  }
  return x;
}

// transposed_without_overlap's case: y [N, M, H * s0, W * s1] from x [N, C, H, W] and w
// [C, M, s0, s1]. Each value is the sgemm chain over C and then, as the general path's col2im
// into a zeroed image and its bias loop compute it, (0 + v) + bias: the same bits. The general
// path packs the whole input again for every output channel.
void conv_transpose_without_overlap(KernelContext& context, const ConvGeometry& g, const float* xd, const float* wd,
                                    const float* bd, const Epilogue* epilogue, float* yd) {
  const int64_t m = g.in_channels, c = g.out_channels, ks = g.kernel_size(), rows = m * ks;
  const int64_t in_size = g.out_size(), in_width = g.out_spatial[1], out_width = g.in_spatial[1];
  const int64_t out_size = g.in_size(), kw = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
  constexpr int64_t kTile = 1024;  // input positions per product: rows x 1024 floats of scratch
  const int64_t tiles = (in_size + kTile - 1) / kTile;
  context.parallel_for(g.batch * tiles, 2 * c * rows * kTile, [&](int64_t begin, int64_t end) {
    float* columns = scratch<float>(static_cast<std::size_t>(rows * kTile));
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t n = unit / tiles, first = (unit % tiles) * kTile, count = std::min(kTile, in_size - first);
      sgemm(rows, count, c, SgemmOperand{wd, 1, rows}, SgemmOperand{xd + n * c * in_size + first, in_size, 1}, columns,
            count);
      // Output rows are written left to right: input row y's run [x0, x0 + len) of this
      // tile fills columns x0 * sw .. (x0 + len) * sw - 1 of output rows y * sh + i.
      for (int64_t ch = 0; ch < m; ++ch) {
        float* plane = yd + (n * m + ch) * out_size;
        const float* taps = columns + ch * ks * count;
        for (int64_t q = 0; q < count;) {
          const int64_t y = (first + q) / in_width, x0 = (first + q) % in_width, len = std::min(in_width - x0, count - q);
          for (int64_t i = 0; i < sh; ++i) {
            float* out = plane + (y * sh + i) * out_width + x0 * sw;
            const float* row_taps = taps + i * kw * count + q;
            int64_t x = 0;
            if (sw == 2) x = interleave_pairs(row_taps, row_taps + count, len, bd ? bd + ch : nullptr, out);
            for (; x < len; ++x)
              for (int64_t j = 0; j < sw; ++j) {
                float v = 0.0f + row_taps[j * count + x];
                if (bd) v = v + bd[ch];
                out[x * sw + j] = v;
              }
            // Each output value is written once: the run is final, and still in cache.
            if (epilogue) activation::finish_rows(epilogue, out, 1, len * sw, len * sw, ch, nullptr);
          }
          q += len;
        }
      }
    }
  });
}

template <typename T>
Status run_conv_transpose(KernelContext& context, const ConvAttributes& attrs) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
  const Tensor* bias = context.input(2);
  if (w->dtype() != x->dtype()) return context.error("weight element type differs from the input's");
  auto geometry = make_conv_transpose_geometry(attrs, x->shape(), w->shape());
  if (!geometry) return context.error(geometry.status().message());
  const ConvGeometry& g = *geometry;
  QFLOW_RETURN_IF_ERROR(check_bias(context, bias, g.in_channels, x->dtype()));
  // The executor's program after this node, run on each output plane as it is finished.
  const Epilogue* epilogue =
      std::is_same_v<T, float> && context.epilogue && context.epilogue->fits(g.image_shape().size(), g.in_channels)
          ? context.epilogue
          : nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (transposed_without_overlap(g)) {
      QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(DType::Float32, g.image_shape()));
      conv_transpose_without_overlap(context, g, x->data<float>(), w->data<float>(),
                                     bias ? bias->data<float>() : nullptr, epilogue, y.data<float>());
      context.outputs[0] = std::move(y);
      context.epilogue_applied = epilogue != nullptr;
      return Status::ok();
    }
  }

  auto made = Tensor::make(x->dtype(), g.image_shape());
  if (!made) return context.error(made.status().message());
  Tensor y = std::move(made).value();
  const int64_t mg = g.in_channels_per_group(), cg = g.out_channels_per_group();
  const int64_t rows = mg * g.kernel_size(), in_size = g.out_size(), out_size = g.in_size();
  if (g.kernel_size() * in_size > Tensor::kDefaultMaxBytes / static_cast<int64_t>(sizeof(T)))
    return context.error("column buffer of " + std::to_string(g.kernel_size()) + " x " + std::to_string(in_size) +
                         " elements is too large");
  const T* xd = x->data<T>();
  const T* wd = w->data<T>();
  const T* bd = bias ? bias->data<T>() : nullptr;
  T* yd = y.data<T>();

  // One unit per (batch, output channel): its columns are the kernel-size rows of W^T * X
  // that channel owns, and col2im scatters them into its own plane only, so the additions
  // never race and their order is fixed whatever the thread count.
  const int64_t ks = g.kernel_size();
  context.parallel_for(g.batch * g.in_channels, 2 * cg * ks * in_size, [&](int64_t begin, int64_t end) {
    T* columns = scratch<T>(static_cast<std::size_t>(ks * in_size));
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t n = unit / g.in_channels, channel = unit % g.in_channels, gi = channel / mg, m = channel % mg;
      const T* input = xd + (n * g.out_channels + gi * cg) * in_size;
      const T* weights = wd + gi * cg * rows + m * ks;  // [cg x ks] with row pitch `rows`
      if constexpr (std::is_same_v<T, float>) {
        sgemm(ks, in_size, cg, SgemmOperand{weights, 1, rows}, SgemmOperand{input, in_size, 1}, columns, in_size);
      } else {
        matrix_view(columns, ks, in_size, in_size).noalias() =
            matrix_view(weights, cg, ks, rows).transpose() * matrix_view(input, cg, in_size, in_size);
      }
      T* image = yd + (n * g.in_channels + channel) * out_size;
      col2im(static_cast<const T*>(columns), g, 1, image);
      finish_rows(image, 1, out_size, out_size, bd ? bd + channel : nullptr, epilogue, channel);
    }
  });
  context.outputs[0] = std::move(y);
  context.epilogue_applied = epilogue != nullptr;
  return Status::ok();
}

// Conv reads its attributes and packs a constant float32 weight once, and can fuse the
// activation that follows it.
class ConvKernel final : public Kernel {
 public:
  ConvKernel(ConvAttributes attrs, std::unique_ptr<PackedConvWeights> packed, std::unique_ptr<DirectConvWeights> direct)
      : attrs_(std::move(attrs)), packed_(std::move(packed)), direct_(std::move(direct)) {}
  bool supports_epilogue() const override { return true; }
  Status compute(KernelContext& context) const override {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
    QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
    if (w->dtype() != x->dtype()) return context.error("weight element type differs from the input's");
    std::shared_ptr<const ConvShapes> shapes;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      shapes = shapes_;
    }
    if (!shapes || shapes->x != x->shape() || shapes->w != w->shape()) {
      auto geometry = make_conv_geometry(attrs_, x->shape(), w->shape());
      if (!geometry) return context.error(geometry.status().message());
      auto made = std::make_shared<ConvShapes>(ConvShapes{x->shape(), w->shape(), std::move(geometry).value(), {}});
      if (made->is_depthwise()) made->depthwise.emplace(made->g);
      shapes = made;
      const std::lock_guard<std::mutex> lock(mutex_);
      shapes_ = shapes;
    }
    return dispatch_float(x->dtype(), [&]<typename T>() { return run_conv<T>(context, *shapes, packed_.get(), direct_.get()); });
  }

 private:
  ConvAttributes attrs_;
  std::unique_ptr<PackedConvWeights> packed_;
  std::unique_ptr<DirectConvWeights> direct_;
  // The shapes of the last call: a model runs with the same shapes every time, and deriving
  // them allocated a dozen small vectors per call. Executors may run in parallel threads.
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const ConvShapes> shapes_;
};

// ConvTranspose, taking the chain the executor fused after it (a detection head's bias,
// BatchNorm and Relu) on each output plane as the plane is written.
class ConvTransposeKernel final : public Kernel {
 public:
  explicit ConvTransposeKernel(ConvAttributes attrs) : attrs_(std::move(attrs)) {}
  bool supports_epilogue() const override { return true; }
  Status compute(KernelContext& context) const override {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
    return dispatch_float(x->dtype(), [&]<typename T>() { return run_conv_transpose<T>(context, attrs_); });
  }

 private:
  ConvAttributes attrs_;
};

}  // namespace

void register_conv_kernels(KernelRegistry& registry) {
  registry.add("", "Conv", 1, kLatestOpset,
               [](const Node& node, int64_t,
                  const std::vector<const Tensor*>& constants) -> Expected<std::unique_ptr<Kernel>> {
                 ConvAttributes attrs = read_conv_attributes(node);
                 const Tensor* weight = constants.size() > 1 ? constants[1] : nullptr;
                 auto packed = weight ? PackedConvWeights::make(*weight, attrs.group) : nullptr;
                 auto direct = packed ? DirectConvWeights::make(*weight, attrs.group) : nullptr;
                 return std::unique_ptr<Kernel>(new ConvKernel(std::move(attrs), std::move(packed), std::move(direct)));
               });
  registry.add("", "ConvTranspose", 1, kLatestOpset,
               [](const Node& node, int64_t, const std::vector<const Tensor*>&) -> Expected<std::unique_ptr<Kernel>> {
                 return std::unique_ptr<Kernel>(new ConvTransposeKernel(read_conv_attributes(node)));
               });
}

}  // namespace qflow
