// The [quantization] keys of a pipeline file: names, types and their text form, shared by
// the parser, `--set quantization.KEY=VALUE`, the canonical formatter and tools that
// write overrides back (docs/quantization.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// The settable keys, sorted: activation-bits, activation-dtype, per-channel, power-of-two,
// quantize, reduce-range, symmetric, weight-bits, weight-dtype.
const std::vector<std::string>& quantization_keys();
// The declared type of a key (String for the dtypes, Int for the bits, Bool for the others).
OptionType quantization_key_type(const std::string& key);

// Sets `key` of `entry`; an unknown key, a wrong type or a dtype a tensor cannot take is an
// error whose message names the key and the allowed values (the caller adds where).
Status set_quantization_key(QuantOverride& entry, const std::string& key, const OptionValue& value);

// The keys an override sets, sorted, as TOML value text ("\"int16\"", "false").
std::vector<std::pair<std::string, std::string>> quantization_fields(const QuantOverride& entry);

// The [quantization] table in canonical TOML ("" when the config is empty).
std::string format_quantization(const QuantConfig& config);

}  // namespace qflow
