// Entry point of libqflow_backend_bpu: registers the bpu target (placement, check, performance
// estimate, .bc and .hbm) and its `qflow hbm` command with the host.
#include "bpu_target.h"
#include "hbm_command.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_components(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_target(qflow::BpuTarget::info(), &qflow::BpuTarget::create));
  return registrar.add_command(qflow::HbmCommand::info(), &qflow::HbmCommand::create);
}

}  // namespace

QFLOW_PLUGIN("backend-bpu", "0.1.0", register_components)
