// The quantization inputs of commands that build QDQ models themselves (sensitivity, compare
// --qparams): a calibration table and the [quantization] settings a pipeline would use.
#pragma once

#include <string>

#include <boost/program_options.hpp>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow::cli {

// Adds --pipeline FILE (its [quantization] table) and --set quantization.KEY=VALUE
// (whole-model keys, after the file's, as `qflow run` applies them).
void add_quantization_options(boost::program_options::options_description& options);

// The settings those options give; all defaults when neither is present. A --set that is
// not quantization.KEY=VALUE, an unknown key or a wrong value is an error naming it.
Expected<QuantConfig> quantization_settings(const boost::program_options::variables_map& values);

// Whether --pipeline or --set was given.
bool has_quantization_options(const boost::program_options::variables_map& values);

// A calibration table as a pipeline's `load` calibrator reads and checks it against `model`.
Expected<QuantTable> load_calibration_table(const Model& model, const std::string& path);

// Gives every per-tensor activation entry whose dtype differs from the one `config` asks for
// that tensor the parameters its calibrator would have chosen under the new type: the same
// threshold and clipped range [scale * (qmin - zp), scale * (qmax - zp)] through
// activation_params(). Entries already of the asked type are left as they are.
Status retype_activations(const Model& model, QuantTable& table, const QuantConfig& config);

}  // namespace qflow::cli
