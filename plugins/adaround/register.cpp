// Entry point of libqflow_adaround: registers the adaround pass with the host.
#include "adaround_pass.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_adaround(qflow::ComponentRegistrar& registrar) {
  return registrar.add_pass(qflow::AdaRound::info(), &qflow::AdaRound::create);
}

}  // namespace

QFLOW_PLUGIN("adaround", "0.1.0", register_adaround)
