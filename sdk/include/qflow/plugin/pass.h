// Pass: a graph transformation with a cheap applicability check and counted effects.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

struct PassResult {
  bool changed = false;
  // Named effects, e.g. {"nodes-removed": 3}; reported in the manifest.
  std::map<std::string, int64_t> counters;
  double seconds = 0.0;  // filled by Pass::run
  // The pass made values whose types it cannot know (nodes copied out of a subgraph carry
  // none): the host infers every value's type again, then runs the pass once more, until it
  // no longer asks (a pipeline stage does so at most 8 times).
  bool types_stale = false;
};

// A named pass pipeline: a pass list under one name, usable in a `passes` stage's list
// wherever a pass name is ("float-optimize,cross-layer-equalization"). `passes` is the same
// textual form: pass names (with options, "name<key=value;key=value>") and other pipelines'
// names, comma-separated (docs/passes.md, "Pass lists").
struct PassPipelineInfo {
  std::string name;     // kebab-case, unique among passes and pass pipelines
  std::string summary;  // one line
  std::string passes;
};

// The calibration samples of a pass's stage (its `dataset` input), read one at a time so that
// memory does not grow with their number. Thread-safe: several threads may read at once.
class PassSamples {
 public:
  virtual ~PassSamples() = default;
  virtual int64_t count() const = 0;
  // Sample `index` in [0, count()): a tensor per graph input the dataset feeds, by input
  // name, shaped as the model is fed (a leading batch axis of 1 when the input declares one).
  virtual Expected<std::map<std::string, Tensor>> sample(int64_t index) const = 0;
};

// What the host offers a pass besides the model.
struct PassContext {
  // Null when the stage has no `dataset` input; a pass whose ComponentInfo says needs_samples
  // always gets them (validation refuses its stage otherwise).
  const PassSamples* samples = nullptr;
  // The pipeline's [quantization] table with its target's rule merged in; null means all
  // defaults (QuantConfig{}.resolve gives each node's QuantSpec).
  const QuantConfig* quantization = nullptr;
};

class Pass {
 public:
  virtual ~Pass() = default;

  // Runs the pass: "nothing to do" is success with changed = false. Times the run and
  // turns an exception escaping the pass into an Internal status.
  Expected<PassResult> run(Model& model, const PassContext& context = {}) {
    const auto start = std::chrono::steady_clock::now();
    Expected<PassResult> result = PassResult{};
    try {
      result = matches(model) ? run_with_context(model, context) : Expected<PassResult>(PassResult{});
    } catch (const std::exception& e) {
      return internal_error(std::string("pass threw: ") + e.what());
    } catch (...) {
      return internal_error("pass threw a non-standard exception");
    }
    if (result) result->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

 private:
  // Cheap pre-check; false skips run_impl.
  virtual bool matches(const Model& model) const {
    (void)model;
    return true;
  }
  virtual Expected<PassResult> run_impl(Model& model) = 0;
  // Passes that read samples or quantization settings override this one; the others keep
  // run_impl(model) alone.
  virtual Expected<PassResult> run_with_context(Model& model, const PassContext& context) {
    (void)context;
    return run_impl(model);
  }
};

}  // namespace qflow
