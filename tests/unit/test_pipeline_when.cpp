// Unit tests for what lets one pipeline file serve several targets: a stage's `when`
// (stages left out, alternatives sharing an id, inputs from left-out stages) and the
// [quantization] table's `target`, `target-options` and var references.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/stage_execution.h"
#include "framework/quant/precision_search.h"

namespace qflow {

namespace {

ComponentCatalog catalog() {
  std::vector<ComponentInfo> components;
  components.push_back({ComponentKind::Pass, "dead-code-elimination", "dce", {}});
  for (const char* name : {"npu", "cpu-rt"})
    components.push_back({ComponentKind::Target, name, "a target",
                          {{"platform", OptionType::String, std::string(), "platform"},
                           {"platform-dir", OptionType::String, std::string(), "folders"}}});
  return ComponentCatalog(std::move(components));
}

// One import for each target, a check on either, a verify only the npu has, and a report
// that reads the verify when there is one.
constexpr const char* kTwoTargets = R"([vars]
model = "m.onnx"
data = "d.npy"
target = "npu"
platform = ""

[[stage]]
id = "import"
use = "import-onnx"
when = { target = "npu" }
inputs = { dataset = "data.dataset" }
options = { path = "${model}" }

[[stage]]
id = "import"
use = "import-onnx"
when = { target = ["cpu-rt", "other"] }
options = { path = "${model}" }

[[stage]]
id = "data"
use = "load-data"
options = { path = "${data}" }

[[stage]]
id = "check"
use = "target-check:${target}"
inputs = { model = "import.model" }
options = { platform = "${platform}" }

[[stage]]
id = "lower"
use = "target-lower:${target}"
inputs = { model = "import.model" }

[[stage]]
id = "verify"
use = "target-verify:${target}"
when = { target = "npu" }
inputs = { model = "import.model", deployable = "lower.deployable", dataset = "data.dataset" }

[[stage]]
id = "report"
use = "report"
inputs = { check = "check.report", verify = "verify.report" }
)";

Expected<Pipeline> resolved(const std::string& text, const std::vector<std::string>& sets = {}) {
  Expected<Pipeline> pipeline = parse_pipeline(text, "p.toml", sets);
  if (!pipeline) return pipeline.status();
  const Status status = resolve_pipeline(*pipeline, catalog(), sets);
  if (!status.is_ok()) return status;
  return pipeline;
}

std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  Expected<Pipeline> pipeline = resolved(text, sets);
  return pipeline ? std::string() : pipeline.status().message();
}

std::vector<std::string> ids(const Pipeline& pipeline) {
  std::vector<std::string> out;
  for (const PipelineStage& stage : pipeline.stages) out.push_back(stage.id);
  return out;
}

const PipelineStage& stage(const Pipeline& pipeline, const std::string& id) {
  for (const PipelineStage& s : pipeline.stages)
    if (s.id == id) return s;
  FAIL("no stage " << id);
  return pipeline.stages.front();
}

std::string with_stage(const std::string& stage_text) {
  return std::string("[vars]\nmodel = \"m.onnx\"\ntarget = \"npu\"\nlevel = 2\n\n[[stage]]\nid = \"import\"\n"
                     "use = \"import-onnx\"\noptions = { path = \"${model}\" }\n\n") +
         stage_text;
}

}  // namespace

TEST_CASE("pipeline when: a stage runs only when its vars match; one of two alternatives runs") {
  Expected<Pipeline> npu = resolved(kTwoTargets);
  REQUIRE_MESSAGE(npu.has_value(), npu.status().message());
  CHECK(ids(*npu) == std::vector<std::string>{"import", "data", "check", "lower", "verify", "report"});
  CHECK(stage(*npu, "import").inputs.count("dataset") == 1);
  CHECK(stage(*npu, "report").inputs.count("verify") == 1);
  CHECK(npu->skipped.empty());  // the other import answers for the one left out

  Expected<Pipeline> cpu = resolved(kTwoTargets, {"target=cpu-rt"});
  REQUIRE_MESSAGE(cpu.has_value(), cpu.status().message());
  CHECK(ids(*cpu) == std::vector<std::string>{"import", "data", "check", "lower", "report"});
  CHECK(stage(*cpu, "import").inputs.empty());
  CHECK(stage(*cpu, "check").component == "cpu-rt");
  // An optional input from a stage left out is dropped, with its dependency.
  CHECK(stage(*cpu, "report").inputs.count("verify") == 0);
  CHECK(stage(*cpu, "report").inputs.count("check") == 1);
  REQUIRE(cpu->skipped.size() == 1);
  CHECK(cpu->skipped[0].id == "verify");
  CHECK(cpu->skipped[0].why == "target = \"npu\" (it is \"cpu-rt\")");

  // The canonical form is the resolved pipeline: the stages that run, without `when`.
  const std::string canonical = format_pipeline(*cpu);
  CHECK(canonical.find("when") == std::string::npos);
  CHECK(canonical.find("id = \"verify\"") == std::string::npos);
  Expected<Pipeline> again = resolved(canonical);
  REQUIRE_MESSAGE(again.has_value(), again.status().message());
  CHECK(format_pipeline(*again) == canonical);
}

TEST_CASE("pipeline when: errors name the stage, the var and what was expected") {
  CHECK(error_of(kTwoTargets, {"target=cpu-rt", "verify.limit=4"}) ==
        "--set verify.limit=4: stage 'verify' is left out of this run (when target = \"npu\" (it is \"cpu-rt\"))");
  CHECK(error_of(with_stage("[[stage]]\nid = \"d\"\nuse = \"dead-code-elimination\"\nwhen = { targt = \"npu\" }\n"
                            "inputs = { model = \"import.model\" }\n")) ==
        "p.toml:14:18: unknown var 'targt' in 'when' of stage 'd' (vars: level, model, target)");
  CHECK(error_of(with_stage("[[stage]]\nid = \"d\"\nuse = \"dead-code-elimination\"\nwhen = { level = \"2\" }\n"
                            "inputs = { model = \"import.model\" }\n")) ==
        "p.toml:14:18: 'when' of stage 'd': var 'level' is int, got string");
  CHECK(error_of(with_stage("[[stage]]\nid = \"d\"\nuse = \"dead-code-elimination\"\nwhen = \"npu\"\n"
                            "inputs = { model = \"import.model\" }\n")) ==
        "p.toml:14:8: 'when' of stage 'd' must be a table of var = value or var = [values], got string");
  CHECK(error_of(with_stage("[[stage]]\nid = \"d\"\nuse = \"dead-code-elimination\"\nwhen = { target = [] }\n"
                            "inputs = { model = \"import.model\" }\n")) ==
        "p.toml:14:19: 'when' of stage 'd': var 'target' lists no value");
  // A stage whose `when` fails still has to be well-formed.
  CHECK(error_of(with_stage("[[stage]]\nid = \"d\"\nuse = \"dead-code-elimination\"\nwhen = { level = 3 }\n"
                            "inputs = { model = \"import.model\" }\noptions = { x = \"${nope}\" }\n"))
            .find("unknown var 'nope'") != std::string::npos);
  // A required input from a stage left out.
  CHECK(error_of(with_stage("[[stage]]\nid = \"a\"\nuse = \"dead-code-elimination\"\nwhen = { level = 3 }\n"
                            "inputs = { model = \"import.model\" }\n\n[[stage]]\nid = \"b\"\n"
                            "use = \"dead-code-elimination\"\ninputs = { model = \"a.model\" }\n")) ==
        "p.toml:20:20: input 'model' of stage 'b': stage 'a' is left out of this run (when level = 3 (it is 2)); give "
        "stage 'b' the same 'when'");
}

TEST_CASE("pipeline when: stages share an id only as alternatives of which one runs") {
  const std::string twice = with_stage("[[stage]]\nid = \"import\"\nuse = \"import-onnx\"\noptions = { path = \"x\" }\n");
  CHECK(error_of(twice) == "p.toml:12:6: duplicate stage id 'import' (first defined on line 7)");
  const std::string one_conditional =
      with_stage("[[stage]]\nid = \"import\"\nuse = \"import-onnx\"\nwhen = { level = 5 }\noptions = { path = \"x\" }\n");
  CHECK(error_of(one_conditional) == "p.toml:12:6: duplicate stage id 'import' (first defined on line 7)");
  const std::string both = std::string(
      "[vars]\nmodel = \"m.onnx\"\nlevel = 2\n\n"
      "[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\nwhen = { level = [1, 2] }\noptions = { path = \"a\" }\n\n"
      "[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\nwhen = { level = 2 }\noptions = { path = \"b\" }\n");
  CHECK(error_of(both) == "p.toml:12:6: stages 'i' on lines 6 and 12 both run: their 'when' conditions both hold");
  Expected<Pipeline> first = resolved(both, {"level=1"});
  REQUIRE_MESSAGE(first.has_value(), first.status().message());
  REQUIRE(first->stages.size() == 1);
  CHECK(std::get<std::string>(first->stages[0].options.at("path").value) == "a");
  // A float var matches an int value.
  Expected<Pipeline> floats = resolved(
      "[vars]\nmodel = \"m.onnx\"\nt = 0.5\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\nwhen = { t = [1, 0.5] }\n"
      "options = { path = \"a\" }\n");
  REQUIRE_MESSAGE(floats.has_value(), floats.status().message());
  CHECK(floats->stages.size() == 1);
}

TEST_CASE("quantization target: named with vars, checked against the target's declaration, canonical") {
  const std::string text = std::string(kTwoTargets) + R"(
[quantization]
target = "${target}"
target-options = ["platform=${platform}"]
per-channel = true
)";
  Expected<Pipeline> p = resolved(text, {"target=cpu-rt", "platform=fast"});
  REQUIRE_MESSAGE(p.has_value(), p.status().message());
  CHECK(p->quantization_target.name == "cpu-rt");
  CHECK(p->quantization_target.options == std::vector<std::string>{"platform=fast"});
  CHECK(p->quantization_target.pos.line == 48);
  const std::string canonical = format_pipeline(*p);
  CHECK(canonical.find("[quantization]\ntarget = \"cpu-rt\"\ntarget-options = [\"platform=fast\"]\nper-channel = true\n") !=
        std::string::npos);
  Expected<Pipeline> again = resolved(canonical);
  REQUIRE_MESSAGE(again.has_value(), again.status().message());
  CHECK(format_pipeline(*again) == canonical);

  CHECK(error_of(text, {"target=cpu-rt", "quantization.target=gpu"}) ==
        "in [quantization]: unknown target 'gpu' (targets: cpu-rt, npu)");
  CHECK(error_of(text, {"target=cpu-rt", "quantization.target-options=platfrom=x"}) ==
        "p.toml:48:10: in [quantization]: target-options: option 'platfrom' is not declared by target 'cpu-rt'; did you "
        "mean 'platform'?");
  CHECK(error_of(std::string(kTwoTargets) + "[quantization]\ntarget-options = [\"platform=a\"]\n") ==
        "p.toml:47:18: in [quantization]: 'target-options' needs 'target'");
  CHECK(error_of(std::string(kTwoTargets) + "[quantization]\ntarget = 3\n") ==
        "p.toml:47:10: 'target' in [quantization] must be a string, got int");
}

TEST_CASE("quantization: values may be var references, which keep the var's type") {
  const std::string text = std::string(
      "[vars]\nmodel = \"m.onnx\"\nrr = true\nact = \"int16\"\n\n"
      "[quantization]\nreduce-range = \"${rr}\"\nactivation-dtype = \"${act}\"\n\n"
      "[quantization.op-type.Conv]\nper-channel = \"${rr}\"\n\n"
      "[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\noptions = { path = \"${model}\" }\n");
  Expected<Pipeline> p = resolved(text, {"rr=false"});
  REQUIRE_MESSAGE(p.has_value(), p.status().message());
  const QuantSpec conv = p->quantization.resolve("c", "Conv");
  CHECK_FALSE(conv.reduce_range);
  CHECK_FALSE(conv.per_channel);
  CHECK(conv.activation_dtype == DType::Int16);
  CHECK(error_of(text, {"act=int4"}) ==
        "p.toml:8:20: in [quantization]: 'activation-dtype' must be one of int8, uint8, int16, uint16, got 'int4'");
}

TEST_CASE("quantization target: the table's keys replace the rule's, level by level") {
  QuantConfig rule;
  rule.model.reduce_range = true;
  rule.model.symmetric = false;
  rule.op_types["Softmax"].activation_dtype = DType::Int16;
  QuantConfig table;
  table.model.symmetric = true;
  table.model.activation_dtype = DType::Int8;
  // The effective settings, as pipeline_quantization merges them.
  const QuantConfig merged = merge_quant_config(rule, table);
  CHECK(merged.resolve("s", "Softmax").activation_dtype == DType::Int16);  // the rule's op type beats the table's model
  CHECK(merged.resolve("c", "Conv").reduce_range);
  CHECK(merged.resolve("c", "Conv").symmetric);
  CHECK(quantization_rule_lines(rule, table) ==
        std::vector<std::string>{"reduce-range = true", "op-type.Softmax: activation-dtype = \"int16\""});
  CHECK(quantization_rule_lines(merged, merged).empty());
}

}  // namespace qflow
