// Running a model of fixed input shapes (a target's deployable file: a simulator, a device
// runtime) on .npy files: input binding, per-sample runs, output concatenation and writing.
// What `qflow infer` does for deployable files, for plugin commands to do the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// A model input or output as the runner sees it: the array dtype it takes or gives.
struct FixedModelIo {
  std::string name;
  Shape shape;
  DType dtype = DType::Float32;
};

// One run: a pointer per input to its elements (in that input's dtype) and one float vector
// per output to fill.
using FixedModelRun = std::function<Status(const std::vector<const std::byte*>& inputs,
                                           std::vector<std::vector<float>>& outputs)>;

// A whole .npy file as a tensor, with the host's checks (format versions 1.0-3.0, little-endian
// C-order arrays of the usual dtypes, sizes checked before allocating, --max-memory).
Expected<Tensor> read_npy_array(const std::string& path);

// The file an output is written to, "<name>.npy" without it: the name with every character
// but letters, digits, '_', '-' and '.' turned into '_' (and no leading '.').
std::string safe_file_name(const std::string& name);

// Binds `specs` (FILE.npy or NAME=FILE.npy; unnamed ones to the inputs in order), reads and
// checks the arrays, runs `run` once, or once per sample when an input of batch 1 gets a
// stack of samples along the first axis, concatenates the outputs along their first axis and
// writes <output>.npy per output into `dir`, printing one line per file. `carries` are
// "OUTPUT=INPUT" pairs (qflow infer --carry): from the second run on, INPUT (a float input
// given one value) is fed the previous run's OUTPUT.
Status run_fixed_model_on_npy(const std::vector<FixedModelIo>& inputs, const std::vector<FixedModelIo>& outputs,
                              const std::vector<std::string>& specs, const std::vector<std::string>& carries,
                              const std::string& dir, const std::string& source, const FixedModelRun& run);

}  // namespace qflow
