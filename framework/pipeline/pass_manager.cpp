// PassManager: passes in order on one in-memory model, instrumentation around each.
#include "framework/pipeline/pass_manager.h"

#include "framework/onnx/onnx_check.h"
#include "framework/pipeline/input_shapes.h"

namespace qflow {

namespace {

class VerifyEach final : public PassInstrumentation {
 public:
  Status after_pass(const PassRecord& record, const Model& model) override {
    const std::string context = "--verify-each after pass '" + record.name + "'";
    QFLOW_RETURN_IF_ERROR(model.graph->validate().with_context(context + ": graph check"));
    return check_model(model).with_context(context + ": onnx checker");
  }
};

}  // namespace

void PassManager::add_pass(std::string name, std::shared_ptr<Pass> pass) {
  passes_.emplace_back(std::move(name), std::move(pass));
}

void PassManager::add_instrumentation(std::shared_ptr<PassInstrumentation> instrumentation) {
  instrumentations_.push_back(std::move(instrumentation));
}

Expected<std::vector<PassRecord>> PassManager::run(Model& model, const PassContext& context) const {
  std::vector<PassRecord> records;
  for (const auto& [name, pass] : passes_) {
    for (const auto& instrumentation : instrumentations_) instrumentation->before_pass(name, model);
    PassRecord record;
    record.name = name;
    record.nodes_before = static_cast<int64_t>(model.graph->node_count());
    bool types_stale = true;
    // Where ONNX inference fails the types stay unknown, for later stages to report.
    for (int round = 0; types_stale && round < kMaxTypeRounds; ++round) {
      if (round > 0 && !reinfer_shapes(model).is_ok()) break;
      Expected<PassResult> effect = pass->run(model, context);
      if (!effect) return effect.status().with_context("pass '" + name + "'");
      for (const auto& [counter, count] : effect->counters) record.counters[counter] += count;
      record.changed = record.changed || effect->changed;
      record.seconds += effect->seconds;
      types_stale = effect->types_stale;
    }
    if (types_stale) (void)reinfer_shapes(model);
    record.nodes_after = static_cast<int64_t>(model.graph->node_count());
    for (const auto& instrumentation : instrumentations_)
      QFLOW_RETURN_IF_ERROR(instrumentation->after_pass(record, model));
    records.push_back(std::move(record));
  }
  return records;
}

std::shared_ptr<PassInstrumentation> verify_each_instrumentation() { return std::make_shared<VerifyEach>(); }

}  // namespace qflow
