// Pass: a graph transformation with a cheap applicability check and counted effects.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

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

class Pass {
 public:
  virtual ~Pass() = default;

  // Runs the pass: "nothing to do" is success with changed = false. Times the run and
  // turns an exception escaping the pass into an Internal status.
  Expected<PassResult> run(Model& model) {
    const auto start = std::chrono::steady_clock::now();
    Expected<PassResult> result = PassResult{};
    try {
      result = matches(model) ? run_impl(model) : Expected<PassResult>(PassResult{});
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
};

}  // namespace qflow
