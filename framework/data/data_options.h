// The load-data options (declared in the pipeline resolver's host stage table) checked and
// turned into a DataSpec.
#pragma once

#include "framework/data/dataset.h"
#include "qflow/core/status.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Every value is checked; an error is one line naming the option and what it accepts.
// Options absent from `options` keep DataSpec's defaults.
Expected<DataSpec> data_spec_from_options(const Options& options);

}  // namespace qflow
