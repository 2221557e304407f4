// Entry point of libqflow_backend_bpu: registers the BPU backend with the host.
#include "bpu_backend.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_backend(qflow::ComponentRegistrar& registrar) {
  return registrar.add_backend(qflow::BpuBackend::info(), &qflow::BpuBackend::create);
}

}  // namespace

QFLOW_PLUGIN("backend-bpu", "0.1.0", register_backend)
