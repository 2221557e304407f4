// Entry point of libqflow_passes: registers the built-in graph passes with the host.
#include "dead_code_elimination.h"
#include "fold_batchnorm.h"
#include "fuse_matmul_add.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

// One line per pass.
qflow::Status register_passes(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::DeadCodeElimination::info(), &qflow::DeadCodeElimination::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FoldBatchNorm::info(), &qflow::FoldBatchNorm::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(qflow::FuseMatMulAdd::info(), &qflow::FuseMatMulAdd::create));
  return qflow::Status::ok();
}

}  // namespace

QFLOW_PLUGIN("passes", "0.1.0", register_passes)
