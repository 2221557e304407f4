// Entry point of libqflow_passes: registers the built-in graph passes with the host.
#include "constant_folding.h"
#include "cross_layer_equalization.h"
#include "dead_code_elimination.h"
#include "eliminate_identity.h"
#include "flush_denormals.h"
#include "float16_to_float32.h"
#include "fuse_gelu.h"
#include "fuse_hardsigmoid.h"
#include "fuse_hardswish.h"
#include "fuse_layernorm.h"
#include "fold_batchnorm.h"
#include "fuse_matmul_add.h"
#include "integer_to_float.h"
#include "shape_folding.h"
#include "strip_qdq.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

// One line per pass.
qflow::Status register_passes(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::DeadCodeElimination::info(), &qflow::DeadCodeElimination::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FuseHardSigmoid::info(), &qflow::FuseHardSigmoid::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FuseHardSwish::info(), &qflow::FuseHardSwish::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FuseLayerNorm::info(), &qflow::FuseLayerNorm::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FuseGelu::info(), &qflow::FuseGelu::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FoldBatchNorm::info(), &qflow::FoldBatchNorm::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FuseMatMulAdd::info(), &qflow::FuseMatMulAdd::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::CrossLayerEqualization::info(), &qflow::CrossLayerEqualization::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::ConstantFolding::info(), &qflow::ConstantFolding::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::ShapeFolding::info(), &qflow::ShapeFolding::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::EliminateIdentity::info(), &qflow::EliminateIdentity::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::Float16ToFloat32::info(), &qflow::Float16ToFloat32::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::StripQdq::info(), &qflow::StripQdq::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::IntegerToFloat::info(), &qflow::IntegerToFloat::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FlushDenormals::info(), &qflow::FlushDenormals::create));
  // What every shipped pipeline runs on the float model before calibration, in this order:
  // float16 and integer models back to float32 first (the later passes see float ops only),
  // folding before the fusions (their patterns match constants), subnormal constants flushed
  // after every pass that computes constants, dead code last.
  QFLOW_RETURN_IF_ERROR(registrar.add_pass_pipeline(
      {"float-optimize", "the float model ready for calibration: float32, constants and shapes folded, BatchNorm and "
                         "MatMul+Add folded, activations and LayerNorm/GELU fused, subnormal constants flushed to "
                         "zero, dead code removed",
       "float16-to-float32,integer-to-float,constant-folding,shape-folding,eliminate-identity,fold-batchnorm,"
       "fuse-matmul-add,fuse-hardswish,fuse-hardsigmoid,fuse-layernorm,fuse-gelu,flush-denormals,"
       "dead-code-elimination"}));
  return qflow::Status::ok();
}

}  // namespace

QFLOW_PLUGIN("passes", "0.1.0", register_passes)
