// The bpu target's deployable files run on the host: the `.bc` through the fixed-point
// simulator (runtime/lowered), the `.hbm` through the runtime C API, as a device application
// loads it.
#pragma once

#include <memory>
#include <string>

#include "qflow/plugin/target.h"

namespace qflow {

Expected<std::unique_ptr<DeployedModel>> load_bc(const std::string& bytes);
Expected<std::unique_ptr<DeployedModel>> load_hbm(const std::string& bytes);

}  // namespace qflow
