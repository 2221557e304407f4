// PassManager: runs a list of passes in memory on one model, in the manner of LLVM's new pass
// manager: the passes know nothing of files or of each other, and what a run wants to see
// around them (checks, graph dumps, intermediate models) are instrumentation hooks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// What one pass did: the manifest's and the summary's per-pass record.
struct PassRecord {
  std::string name;
  int64_t nodes_before = 0;
  int64_t nodes_after = 0;
  bool changed = false;
  double seconds = 0.0;  // the pass's own time (every round)
  std::map<std::string, int64_t> counters;
};

// Hooks around every pass. `after_pass` may fail the run (verify-each does).
class PassInstrumentation {
 public:
  virtual ~PassInstrumentation() = default;
  virtual void before_pass(const std::string& pass, const Model& model) {
    (void)pass;
    (void)model;
  }
  virtual Status after_pass(const PassRecord& record, const Model& model) = 0;
};

class PassManager {
 public:
  void add_pass(std::string name, std::shared_ptr<Pass> pass);
  void add_instrumentation(std::shared_ptr<PassInstrumentation> instrumentation);

  // Runs every pass in order. A pass that made values without types (PassResult::types_stale)
  // runs again on freshly inferred ones, at most kMaxTypeRounds times; its counters add up.
  // A failure names the pass.
  // `context` is handed to every pass (samples, quantization settings).
  Expected<std::vector<PassRecord>> run(Model& model, const PassContext& context = {}) const;

  static constexpr int kMaxTypeRounds = 8;

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Pass>>> passes_;
  std::vector<std::shared_ptr<PassInstrumentation>> instrumentations_;
};

// Graph::validate() and libonnx's checker after every pass (--verify-each): the exporter would
// otherwise be the first to trip over a dangling value, with a less pointed message.
std::shared_ptr<PassInstrumentation> verify_each_instrumentation();

}  // namespace qflow
