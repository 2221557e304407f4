// PassManager: passes in order on one in-memory model, records, instrumentation, failures.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "framework/pipeline/pass_manager.h"
#include "test_model_util.h"

namespace qflow {

namespace {

// Appends its name to a shared log and, when told to, removes the graph's last node.
class LoggingPass final : public Pass {
 public:
  LoggingPass(std::string name, std::vector<std::string>& log, bool remove_last = false, bool fail = false)
      : name_(std::move(name)), log_(log), remove_last_(remove_last), fail_(fail) {}

 private:
  Expected<PassResult> run_impl(Model& model) override {
    log_.push_back(name_ + ":" + std::to_string(model.graph->node_count()));
    if (fail_) return invalid_input("broken on purpose");
    PassResult result;
    if (remove_last_) {
      Node* last = model.graph->nodes().back().get();
      model.graph->remove_node(last);
      result.changed = true;
      result.counters["nodes-removed"] = 1;
    }
    return result;
  }
  std::string name_;
  std::vector<std::string>& log_;
  bool remove_last_, fail_;
};

class Recorder final : public PassInstrumentation {
 public:
  explicit Recorder(std::vector<std::string>& log) : log_(log) {}
  void before_pass(const std::string& pass, const Model&) override { log_.push_back("before " + pass); }
  Status after_pass(const PassRecord& record, const Model&) override {
    log_.push_back("after " + record.name + " " + std::to_string(record.nodes_before) + "->" +
                   std::to_string(record.nodes_after));
    return Status::ok();
  }

 private:
  std::vector<std::string>& log_;
};

}  // namespace

TEST_CASE("pass manager: passes run in order on the same model, instrumentation around each") {
  Model model = test::mlp_model(test::floats({8, 8}, test::wave(64, 0.3, 0.5)));
  std::vector<std::string> log;
  PassManager manager;
  manager.add_pass("first", std::make_shared<LoggingPass>("first", log));
  manager.add_pass("cut", std::make_shared<LoggingPass>("cut", log, true));
  manager.add_pass("last", std::make_shared<LoggingPass>("last", log));
  manager.add_instrumentation(std::make_shared<Recorder>(log));
  Expected<std::vector<PassRecord>> records = manager.run(model);
  REQUIRE_MESSAGE(records.has_value(), records.status().message());
  CHECK(log == std::vector<std::string>{"before first", "first:3", "after first 3->3", "before cut", "cut:3",
                                        "after cut 3->2", "before last", "last:2", "after last 2->2"});
  REQUIRE(records->size() == 3);
  CHECK((*records)[1].name == "cut");
  CHECK((*records)[1].changed);
  CHECK((*records)[1].counters.at("nodes-removed") == 1);
  CHECK_FALSE((*records)[0].changed);
  CHECK(model.graph->node_count() == 2);
}

TEST_CASE("pass manager: a failing pass stops the run and is named") {
  Model model = test::mlp_model(test::floats({8, 8}, test::wave(64, 0.3, 0.5)));
  std::vector<std::string> log;
  PassManager manager;
  manager.add_pass("broken", std::make_shared<LoggingPass>("broken", log, false, true));
  manager.add_pass("never", std::make_shared<LoggingPass>("never", log));
  Expected<std::vector<PassRecord>> records = manager.run(model);
  REQUIRE_FALSE(records.has_value());
  CHECK(records.status().message() == "pass 'broken': broken on purpose");
  CHECK(log == std::vector<std::string>{"broken:3"});
}

TEST_CASE("pass manager: verify-each names the pass that broke the graph") {
  Model model = test::mlp_model(test::floats({8, 8}, test::wave(64, 0.3, 0.5)));
  std::vector<std::string> log;
  PassManager manager;
  manager.add_pass("fine", std::make_shared<LoggingPass>("fine", log));
  // Removing "mm2" leaves the graph output y without a producer.
  manager.add_pass("cut-output", std::make_shared<LoggingPass>("cut-output", log, true));
  manager.add_pass("never", std::make_shared<LoggingPass>("never", log));
  manager.add_instrumentation(verify_each_instrumentation());
  Expected<std::vector<PassRecord>> records = manager.run(model);
  REQUIRE_FALSE(records.has_value());
  CHECK(records.status().message().rfind("--verify-each after pass 'cut-output': graph check:", 0) == 0);
  CHECK(log == std::vector<std::string>{"fine:3", "cut-output:3"});
}

}  // namespace qflow
