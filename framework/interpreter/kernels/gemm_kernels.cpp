// Kernels for Gemm and MatMul, split into fixed row blocks: float32 on the packed sgemm (a
// constant B packed once), other types on Eigen products; Gemm applies a fused activation
// per block.
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernels/eigen_maps.h"
#include "framework/interpreter/kernels/sgemm.h"

namespace qflow {

namespace {

// Rows per work unit of the double (Eigen) products. Fixed, so the partition (and every
// element's summation order) depends on the shapes only, never on the thread count.
constexpr int64_t kRowBlock = 64;

// Float products split C by register strips of rows instead, each chunk of the thread pool
// taking its rows in one sgemm call: sgemm's bits do not depend on how C is split, and 64-row
// blocks left the threads unbalanced (80 rows were 64 + 16).
template <typename T>
constexpr int64_t rows_per_unit() {
  return std::is_same_v<T, float> ? kSgemmMr : kRowBlock;
}

// Calls rows(r0, count) over [0, height) for the units [begin, end) of unit_rows rows each:
// one call for the whole range when `whole` (float), else one per unit.
template <typename Rows>
void for_unit_rows(int64_t begin, int64_t end, int64_t unit_rows, int64_t height, bool whole, Rows&& rows) {
  if (whole) {
    const int64_t r0 = begin * unit_rows;
    rows(r0, std::min(height, end * unit_rows) - r0);
    return;
  }
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t r0 = unit * unit_rows;
    rows(r0, std::min(height, r0 + unit_rows) - r0);
  }
}

// A constant float32 B packed once: one sgemm operand per [k x n] matrix (MatMul's B may
// have batch dimensions). It keeps a handle on the tensor it packed, so `packs` can tell that
// tensor from one fed at run time in its place (a weight that is also a graph input).
class PackedB {
 public:
  // Gemm's B [k x n], or [n x k] with transB.
  static std::unique_ptr<PackedB> for_gemm(const Tensor* b, bool trans_b) {
    if (!b || b->dtype() != DType::Float32 || b->rank() != 2) return nullptr;
    const int64_t k = trans_b ? b->dim(1) : b->dim(0), n = trans_b ? b->dim(0) : b->dim(1);
    std::unique_ptr<PackedB> packed(new PackedB(*b));
    packed->matrices_.push_back(sgemm_pack_b(
        k, n, trans_b ? SgemmOperand{b->data<float>(), 1, k} : SgemmOperand{b->data<float>(), n, 1}));
    return packed;
  }
  // MatMul's B [..., k, n] (a 1-D B is left to the unpacked path).
  static std::unique_ptr<PackedB> for_matmul(const Tensor* b) {
    if (!b || b->dtype() != DType::Float32 || b->rank() < 2) return nullptr;
    const int64_t k = b->dim(b->rank() - 2), n = b->dim(b->rank() - 1);
    if (k * n == 0) return nullptr;
    std::unique_ptr<PackedB> packed(new PackedB(*b));
    for (int64_t i = 0; i < b->numel() / (k * n); ++i)
      packed->matrices_.push_back(sgemm_pack_b(k, n, SgemmOperand{b->data<float>() + i * k * n, n, 1}));
    return packed;
  }
  bool packs(const Tensor& b) const {
    return b.dtype() == DType::Float32 && b.data<float>() == source_.data<float>() && b.shape() == source_.shape();
  }
  const SgemmPackedB& matrix(int64_t i) const { return matrices_[static_cast<std::size_t>(i)]; }

 private:
  explicit PackedB(Tensor source) : source_(std::move(source)) {}
  Tensor source_;
  std::vector<SgemmPackedB> matrices_;
};

// The packed B to use for `b`, or null when there is none or `b` is not the tensor packed.
const PackedB* usable(const PackedB* packed, const Tensor& b) { return packed && packed->packs(b) ? packed : nullptr; }

// The element types ONNX allows for Gemm and MatMul, less the 16-bit floats.
template <typename Body>
Status dispatch_gemm_types(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::Float32: return body.template operator()<float>();
    case DType::Float64: return body.template operator()<double>();
    case DType::Int32: return body.template operator()<int32_t>();
    case DType::Int64: return body.template operator()<int64_t>();
    case DType::UInt32: return body.template operator()<uint32_t>();
    case DType::UInt64: return body.template operator()<uint64_t>();
    default:
      return unsupported("element type " + std::string(dtype_name(dtype)) + " is not supported here");
  }
}

template <typename T>
Status run_gemm(KernelContext& context, const PackedB* packed_b) {
  const Node& node = context.node;
  const Tensor* a = context.input(0);
  const Tensor* b = context.input(1);
  const Tensor* c = context.input(2);
  if (!a || !b) return context.error("inputs A and B are required");
  if (b->dtype() != a->dtype() || (c && c->dtype() != a->dtype()))
    return context.error("inputs have different element types");
  if (a->rank() != 2 || b->rank() != 2)
    return context.error("A " + shape_to_string(a->shape()) + " and B " + shape_to_string(b->shape()) +
                         " must both have rank 2");
  const bool trans_a = node.attr_int("transA", 0) != 0, trans_b = node.attr_int("transB", 0) != 0;
  const int64_t m = trans_a ? a->dim(1) : a->dim(0), k = trans_a ? a->dim(0) : a->dim(1);
  const int64_t kb = trans_b ? b->dim(1) : b->dim(0), n = trans_b ? b->dim(0) : b->dim(1);
  if (k != kb)
    return context.error("inner dimensions differ: A " + shape_to_string(a->shape()) + (trans_a ? " (transposed)" : "") +
                         ", B " + shape_to_string(b->shape()) + (trans_b ? " (transposed)" : ""));
  const Shape out_shape{m, n};
  if (c) {
    auto common = broadcast_shapes(c->shape(), out_shape);
    if (!common || *common != out_shape)
      return context.error("C " + shape_to_string(c->shape()) + " does not broadcast to " + shape_to_string(out_shape));
  }
  const T alpha = static_cast<T>(node.attr_float("alpha", 1.0f));
  const T beta = static_cast<T>(node.attr_float("beta", 1.0f));
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(a->dtype(), out_shape));
  const T* ad = a->data<T>();
  const T* bd = b->data<T>();
  T* yd = y.data<T>();
  const std::vector<int64_t> c_strides = c ? broadcast_strides(c->shape(), out_shape) : std::vector<int64_t>{};
  const T* cd = c ? c->data<T>() : nullptr;
  const Epilogue* epilogue =
      std::is_same_v<T, float> && context.epilogue && context.epilogue->fits(out_shape.size(), -1) ? context.epilogue
                                                                                                  : nullptr;

  const PackedB* packed = usable(packed_b, *b);
  constexpr int64_t unit_rows = rows_per_unit<T>();
  const int64_t blocks = (m + unit_rows - 1) / unit_rows;
  context.parallel_for(n > 0 ? blocks : 0, 2 * unit_rows * k * n, [&](int64_t begin, int64_t end) {
    for_unit_rows(begin, end, unit_rows, m, std::is_same_v<T, float>, [&](int64_t r0, int64_t rows) {
      auto out = matrix_view(yd + r0 * n, rows, n, n);
      if constexpr (std::is_same_v<T, float>) {
        const SgemmOperand am = trans_a ? SgemmOperand{ad + r0, 1, m} : SgemmOperand{ad + r0 * k, k, 1};
        if (packed) sgemm(rows, am, packed->matrix(0), yd + r0 * n, n);
        else
          sgemm(rows, n, k, am, trans_b ? SgemmOperand{bd, 1, k} : SgemmOperand{bd, n, 1}, yd + r0 * n, n);
        if (alpha != 1.0f) out *= alpha;
      } else {
        auto bm = matrix_view(bd, b->dim(0), b->dim(1), b->dim(1));
        if (trans_a) {
          auto am = matrix_view(ad, k, m, m).middleCols(r0, rows).transpose();
          if (trans_b) out.noalias() = alpha * (am * bm.transpose());
          else out.noalias() = alpha * (am * bm);
        } else {
          auto am = matrix_view(ad + r0 * k, rows, k, k);
          if (trans_b) out.noalias() = alpha * (am * bm.transpose());
          else out.noalias() = alpha * (am * bm);
        }
      }
      if (cd && beta != T(0))
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j)
            out(i, j) += beta * cd[(r0 + i) * c_strides[0] + j * c_strides[1]];
      if constexpr (std::is_same_v<T, float>) {
        if (epilogue) activation::finish_rows(epilogue, yd + r0 * n, 1, rows * n, 0, -1, nullptr);
      }
    });
  });
  if (epilogue) context.epilogue_applied = true;
  context.outputs[0] = std::move(y);
  return Status::ok();
}

// Gemm packs a constant float32 B once and can fuse the activation that follows it (a
// classifier's hidden layers).
class GemmKernel final : public Kernel {
 public:
  explicit GemmKernel(std::unique_ptr<PackedB> packed_b) : packed_b_(std::move(packed_b)) {}
  bool supports_epilogue() const override { return true; }
  Status compute(KernelContext& context) const override {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* a, context.required_input(0));
    return dispatch_gemm_types(a->dtype(), [&]<typename T>() { return run_gemm<T>(context, packed_b_.get()); });
  }

 private:
  std::unique_ptr<PackedB> packed_b_;
};

template <typename T>
Status run_matmul(KernelContext& context, const PackedB* packed_b) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* a, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* b, context.required_input(1));
  if (b->dtype() != a->dtype()) return context.error("inputs have different element types");
  if (a->rank() == 0 || b->rank() == 0) return context.error("MatMul does not accept scalars");
  // 1-D operands are promoted to matrices, and the added dimension is removed afterwards.
  Shape as = a->shape(), bs = b->shape();
  const bool a_vector = as.size() == 1, b_vector = bs.size() == 1;
  if (a_vector) as.insert(as.begin(), 1);
  if (b_vector) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    return context.error("inner dimensions differ: A " + shape_to_string(a->shape()) + ", B " +
                         shape_to_string(b->shape()));
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  auto batch = broadcast_shapes(a_batch, b_batch);
  if (!batch)
    return context.error("batch dimensions of A " + shape_to_string(a->shape()) + " and B " +
                         shape_to_string(b->shape()) + " do not broadcast");
  Shape out_shape = *batch;
  if (!a_vector) out_shape.push_back(m);
  if (!b_vector) out_shape.push_back(n);
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(a->dtype(), out_shape));

  const int64_t batches = shape_numel(*batch);
  // Matrix index of A and B for each output batch, walking the broadcast batch shape.
  std::vector<int64_t> a_index(static_cast<std::size_t>(batches)), b_index(static_cast<std::size_t>(batches));
  for_each_broadcast(*batch, a_batch, b_batch, [&](int64_t i, int64_t ia, int64_t ib) {
    a_index[static_cast<std::size_t>(i)] = ia;
    b_index[static_cast<std::size_t>(i)] = ib;
  });
  const T* ad = a->data<T>();
  const T* bd = b->data<T>();
  T* yd = y.data<T>();
  const PackedB* packed = b_vector ? nullptr : usable(packed_b, *b);
  // When one B serves every batch and A's matrices follow each other, the products are one
  // tall product [batches * m x k] x [k x n]: fewer, fuller row blocks.
  const bool stacked = shape_numel(b_batch) == 1 && shape_numel(a_batch) == batches;
  const int64_t products = stacked ? 1 : batches, height = stacked ? batches * m : m;
  if constexpr (std::is_same_v<T, float>) {
    // One packed B wider than A is tall (a classifier head: 40 x 120 times 120 x 6625): the
    // threads take column ranges, so each streams its share of B instead of all of it.
    if (packed && products == 1 && n > height) {
      const SgemmOperand am{ad + a_index[0] * m * k, k, 1};
      constexpr int64_t unit_columns = 2 * kSgemmNr;
      context.parallel_for((n + unit_columns - 1) / unit_columns, 2 * height * k * unit_columns,
                           [&](int64_t begin, int64_t end) {
                             const int64_t first = begin * unit_columns, count = std::min(n, end * unit_columns) - first;
                             sgemm_columns(height, am, packed->matrix(b_index[0]), first, count, yd + first, n);
                           });
      context.outputs[0] = std::move(y);
      return Status::ok();
    }
  }
  constexpr int64_t unit_rows = rows_per_unit<T>();
  const int64_t blocks = (height + unit_rows - 1) / unit_rows;
  context.parallel_for(n > 0 ? products * blocks : 0, 2 * unit_rows * k * n, [&](int64_t begin, int64_t end) {
    // A chunk may span several products: its units of each product, as one range.
    for (int64_t first = begin; first < end;) {
      const int64_t bi = first / blocks, last = std::min(end, (bi + 1) * blocks);
      const std::size_t s = static_cast<std::size_t>(bi);
      const T* b_matrix = bd + b_index[s] * k * n;
      auto rows_of_product = [&](int64_t r0, int64_t rows) {
        const T* a_rows = ad + a_index[s] * m * k + r0 * k;
        T* out_rows = yd + bi * m * n + r0 * n;
        if constexpr (std::is_same_v<T, float>) {
          if (packed) sgemm(rows, SgemmOperand{a_rows, k, 1}, packed->matrix(b_index[s]), out_rows, n);
          else sgemm(rows, n, k, a_rows, k, b_matrix, n, out_rows, n);
        } else {
          matrix_view(out_rows, rows, n, n).noalias() =
              matrix_view(a_rows, rows, k, k) * matrix_view(b_matrix, k, n, n);
        }
      };
      for_unit_rows(first - bi * blocks, last - bi * blocks, unit_rows, height, std::is_same_v<T, float>,
                    rows_of_product);
      first = last;
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

// MatMul packs a constant float32 B once.
class MatMulKernel final : public Kernel {
 public:
  explicit MatMulKernel(std::unique_ptr<PackedB> packed_b) : packed_b_(std::move(packed_b)) {}
  Status compute(KernelContext& context) const override {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* a, context.required_input(0));
    return dispatch_gemm_types(a->dtype(), [&]<typename T>() { return run_matmul<T>(context, packed_b_.get()); });
  }

 private:
  std::unique_ptr<PackedB> packed_b_;
};

// Input 1 when it is a constant, else null.
const Tensor* constant_b(const std::vector<const Tensor*>& constants) {
  return constants.size() > 1 ? constants[1] : nullptr;
}

}  // namespace

void register_gemm_kernels(KernelRegistry& registry) {
  registry.add("", "Gemm", 1, kLatestOpset,
               [](const Node& node, int64_t,
                  const std::vector<const Tensor*>& constants) -> Expected<std::unique_ptr<Kernel>> {
                 const bool trans_b = node.attr_int("transB", 0) != 0;
                 return std::unique_ptr<Kernel>(new GemmKernel(PackedB::for_gemm(constant_b(constants), trans_b)));
               });
  registry.add("", "MatMul", 1, kLatestOpset,
               [](const Node&, int64_t, const std::vector<const Tensor*>& constants) -> Expected<std::unique_ptr<Kernel>> {
                 return std::unique_ptr<Kernel>(new MatMulKernel(PackedB::for_matmul(constant_b(constants))));
               });
}

}  // namespace qflow
