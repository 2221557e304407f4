// Entry point of libqflow_backend_bpu: registers the bpu target (placement, check, performance
// estimate, .bc and .hbm) and the bpu backend (the partition plan as JSON) with the host.
#include "bpu_backend.h"
#include "bpu_target.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_backends(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_target(qflow::BpuTarget::info(), &qflow::BpuTarget::create));
  return registrar.add_backend(qflow::BpuBackend::info(), &qflow::BpuBackend::create);
}

}  // namespace

QFLOW_PLUGIN("backend-bpu", "0.1.0", register_backends)
