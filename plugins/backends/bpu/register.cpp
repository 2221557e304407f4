// Entry point of libqflow_backend_bpu: registers the BPU target and the BPU backends (plan, check, performance
// estimate, lowering to .bc, compilation to .hbm) with the host.
#include "bpu_backend.h"
#include "bpu_check_backend.h"
#include "bpu_lowered_backend.h"
#include "bpu_perf_backend.h"
#include "bpu_target.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_backends(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_target(qflow::BpuTarget::info(), &qflow::BpuTarget::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_backend(qflow::BpuBackend::info(), &qflow::BpuBackend::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_backend(qflow::BpuCheckBackend::info(), &qflow::BpuCheckBackend::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_backend(qflow::BpuPerfBackend::info(), &qflow::BpuPerfBackend::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_backend(qflow::BpuLoweredBackend::info(qflow::LoweredFormat::bc),
                                              &qflow::BpuLoweredBackend::create_bc));
  return registrar.add_backend(qflow::BpuLoweredBackend::info(qflow::LoweredFormat::hbm),
                               &qflow::BpuLoweredBackend::create_hbm);
}

}  // namespace

QFLOW_PLUGIN("backend-bpu", "0.1.0", register_backends)
