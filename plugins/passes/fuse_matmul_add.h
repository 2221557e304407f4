// FuseMatMulAdd: turns MatMul followed by a bias Add into one Gemm.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// MatMul(A, W) -> Add(., B), with W a constant 2-D [K, N] initializer, A known to be 2-D
// (declared rank 2, or produced by an op whose output is always 2-D), B a constant [N]
// or [1, N] bias and the MatMul output used only by the Add, becomes Gemm(A, W, B)
// producing the Add's output. Gemm only takes 2-D operands, so an A of unknown rank is
// left alone. Counter: fused.
class FuseMatMulAdd final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
