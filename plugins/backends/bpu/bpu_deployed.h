// The bpu target's deployable files run on the host: the `.bc` through the fixed-point
// simulator (runtime/lowered), the `.hbm` through the runtime C API, as a device application
// loads it.
#pragma once

#include <memory>
#include <string>

#include "input_type.h"
#include "qflow/plugin/target.h"

namespace qflow {

Expected<std::unique_ptr<DeployedModel>> load_bc(const std::string& bytes);
Expected<std::unique_ptr<DeployedModel>> load_hbm(const std::string& bytes);

// `model` (a file with uint8 frame inputs) fed float samples in the train format: each sample
// of an input in `types` becomes its frame (train_to_frame) on the way in, and the reference
// is given the float tensor of that frame (frame_to_train). How verify runs such files.
Expected<std::unique_ptr<DeployedModel>> with_frame_inputs(std::unique_ptr<DeployedModel> model,
                                                           const InputTypeOptions& options);

}  // namespace qflow
