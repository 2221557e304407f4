// Entry point of libqflow_passes: registers the built-in graph passes with the host.
#include "dead_code_elimination.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_passes(qflow::ComponentRegistrar& registrar) {
  return registrar.add_pass(qflow::DeadCodeElimination::info(), &qflow::DeadCodeElimination::create);
}

}  // namespace

QFLOW_PLUGIN("passes", "0.1.0", register_passes)
