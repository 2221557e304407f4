// Entry point of libqflow_backend_bpu: registers the bpu target (placement, check, performance
// estimate, .bc and .hbm) with the host.
#include "bpu_target.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_target(qflow::ComponentRegistrar& registrar) {
  return registrar.add_target(qflow::BpuTarget::info(), &qflow::BpuTarget::create);
}

}  // namespace

QFLOW_PLUGIN("backend-bpu", "0.1.0", register_target)
