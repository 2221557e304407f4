// Entry point of libqflow_target_onnxruntime: registers the onnxruntime target with the host.
#include "ort_target.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_target(qflow::ComponentRegistrar& registrar) {
  return registrar.add_target(qflow::OrtTarget::info(), &qflow::OrtTarget::create);
}

}  // namespace

QFLOW_PLUGIN("target-onnxruntime", "0.1.0", register_target)
