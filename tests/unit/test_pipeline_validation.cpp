// Unit tests for pipeline parsing and validation: every error names file:line:column and the key.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

// Declarations standing in for the built-in plugins, so validation is tested without them.
ComponentCatalog test_catalog() {
  std::vector<ComponentInfo> components;
  components.push_back({ComponentKind::Observer, "minmax", "ranges", {}});
  components.push_back({ComponentKind::Calibrator, "max", "max scale",
                        {{"dtype", OptionType::String, std::string("int8"), "type"},
                         {"power-of-two", OptionType::Bool, false, "pow2"},
                         {"percentile", OptionType::Float, 99.9, "pct"}}});
  components.push_back({ComponentKind::Calibrator, "minmax", "same name as the observer", {}});
  components.push_back({ComponentKind::Pass, "dead-code-elimination", "dce", {}});
  components.push_back({ComponentKind::Pass, "bpu", "a pass with options of every type",
                        {{"platform", OptionType::String, std::string("nash"), "gen"},
                         {"levels", OptionType::Int, int64_t{3}, "levels"},
                         {"tags", OptionType::StringList, std::vector<std::string>{}, "tags"}}});
  components.push_back({ComponentKind::Target, "npu", "a target",
                        {{"platform", OptionType::String, std::string("gen1"), "platform"}}});
  components.push_back({ComponentKind::Target, "named", "a target declaring the lowering stage's own option",
                        {{"name", OptionType::String, std::string(), "clashes"}}});
  return ComponentCatalog(std::move(components));
}

constexpr const char* kHeader = R"([vars]
model = "m.onnx"
data = "d.npy"
name = "net"
)";

// Parses and resolves; returns the error message, or "" on success.
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  Expected<Pipeline> pipeline = parse_pipeline(text, "p.toml", sets);
  if (!pipeline) return pipeline.status().message();
  const Status status = resolve_pipeline(*pipeline, test_catalog(), sets);
  return status.message();
}

Pipeline resolved(const std::string& text, const std::vector<std::string>& sets = {}) {
  Expected<Pipeline> pipeline = parse_pipeline(text, "p.toml", sets);
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  const Status status = resolve_pipeline(*pipeline, test_catalog(), sets);
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  return std::move(pipeline).value();
}

const std::string kImport = std::string(kHeader) + R"(
[[stage]]
id = "import"
use = "import-onnx"
options = { path = "${model}", name = "${name}" }
)";

}  // namespace

TEST_CASE("pipeline: a valid pipeline resolves kinds, defaults, outputs and order") {
  const Pipeline p = resolved(kImport + R"(
[[stage]]
id = "compile"
use = "bpu"
inputs = { model = "opt" }

[[stage]]
id = "opt"
use = "dead-code-elimination"
inputs = { model = "import.model" }
)");
  REQUIRE(p.stages.size() == 3);
  CHECK(p.stages[0].output == "net_original_float_model.onnx");
  CHECK(p.stages[1].kind == StageKind::Pass);
  CHECK(p.stages[1].inputs.at("model").port == "model");
  CHECK(std::get<std::string>(p.stages[1].options.at("platform").value) == "nash");
  CHECK(std::get<int64_t>(p.stages[1].options.at("levels").value) == 3);
  CHECK(p.stages[1].output == "compile.onnx");
  CHECK(p.stages[2].output == "opt.onnx");
  CHECK(p.order == std::vector<std::size_t>{0, 2, 1});
}

TEST_CASE("pipeline: TOML syntax errors carry the position") {
  CHECK(error_of("[vars]\nmodel = \n") == "p.toml:2:1: invalid TOML: toml::parse_key_value_pair: missing value after key-value separator '='");
}

TEST_CASE("pipeline: the file must be UTF-8; multi-byte characters count as one column") {
  // A literal string with a lone lead byte, the input that made toml11 read past its buffer.
  CHECK(error_of("[vars]\n# caf\xc3\xa9\nname = 'x\xc4y'\n") ==
        "p.toml:3:10: invalid TOML: not UTF-8 (byte 0xc4 does not start a valid sequence)");
  CHECK(error_of("[vars]\nname = \"\xe6\xb3\xa8\xed\xa0\x80\"\n") ==
        "p.toml:2:10: invalid TOML: not UTF-8 (byte 0xed does not start a valid sequence)");  // a surrogate
  // Valid multi-byte text parses: what is left to report is the missing stages.
  CHECK(error_of(std::string(kHeader) + "# \xe6\xb3\xa8\xe9\x87\x8a caf\xc3\xa9\n") ==
        "p.toml: the pipeline has no [[stage]] tables");
}

TEST_CASE("pipeline: structural errors") {
  CHECK(error_of("[vars]\nx = 1\n") == "p.toml: the pipeline has no [[stage]] tables");
  CHECK(error_of("stages = 1\n") == "p.toml:1:10: unknown top-level key 'stages' (allowed: plugins, quantization, stage, vars)");
  CHECK(error_of("[[stage]]\nuse = \"max\"\n") == "p.toml:1:1: stage #1 has no 'id'");
  CHECK(error_of("[[stage]]\nid = \"a\"\n") == "p.toml:2:6: stage 'a' has no 'use'");
  CHECK(error_of("[[stage]]\nid = \"a b\"\nuse = \"max\"\n") ==
        "p.toml:2:6: stage id 'a b' must be letters, digits, '-' and '_', starting with a letter or digit");
  CHECK(error_of("[[stage]]\nid = \"a\"\nuse = \"max\"\nwhat = 1\n") ==
        "p.toml:4:8: unknown key 'what' in stage 'a' (allowed: id, use, inputs, options, output, timeout, when)");
  CHECK(error_of("[[stage]]\nid = \"a\"\nuse = \"dead-code-elimination\"\noutput = \"x/y.onnx\"\n") ==
        "p.toml:4:10: 'output' of stage 'a' must be a file name without folders, got 'x/y.onnx'");
  CHECK(error_of("[vars]\nx = [1]\n[[stage]]\nid = \"a\"\nuse = \"max\"\n") ==
        "p.toml:2:5: var 'x' must be a string, int, float or bool, got array");
}

TEST_CASE("pipeline: duplicate stage id") {
  CHECK(error_of(kImport + "[[stage]]\nid = \"import\"\nuse = \"load-data\"\n") ==
        "p.toml:11:6: duplicate stage id 'import' (first defined on line 7)");
}

TEST_CASE("pipeline: unknown var, with the vars there are") {
  CHECK(error_of(std::string(kHeader) + "[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\noptions = { path = \"${modle}\" }\n") ==
        "p.toml:8:20: unknown var 'modle' in option 'path' of stage 'i' (vars: data, model, name)");
  CHECK(error_of("[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\noutput = \"${x\"\n") ==
        "p.toml:4:10: unterminated '${' in 'output' of stage 'i'");
}

TEST_CASE("pipeline: a var derived from another follows --set; :stem names files after the model") {
  const std::string text = R"([vars]
model = "models/fashion.onnx"
name = "${model:stem}"
tag = "${name}-$${x}"
[[stage]]
id = "import"
use = "import-onnx"
options = { path = "${model}", name = "${name}" }
output = "${model:stem}_float.onnx"
)";
  Pipeline p = resolved(text);
  CHECK(std::get<std::string>(p.vars.at("name").value) == "fashion");
  CHECK(std::get<std::string>(p.vars.at("tag").value) == "fashion-${x}");
  CHECK(p.stages[0].output == "fashion_float.onnx");
  Pipeline set = resolved(text, {"model=/data/ocr/rec_v4.onnx"});
  CHECK(std::get<std::string>(set.vars.at("name").value) == "rec_v4");
  CHECK(std::get<std::string>(set.stages[0].options.at("name").value) == "rec_v4");
  Pipeline named = resolved(text, {"model=/data/ocr/rec_v4.onnx", "name=rec"});
  CHECK(std::get<std::string>(named.vars.at("name").value) == "rec");
  CHECK(error_of("[vars]\na = \"${b}\"\nb = \"${a}\"\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n") ==
        "p.toml:2:5: var 'a' refers to itself");
  CHECK(error_of("[vars]\na = \"${c}\"\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n") ==
        "p.toml:2:5: unknown var 'c' in var 'a'");
  CHECK(error_of("[vars]\na = \"${b:upper}\"\nb = \"x\"\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n") ==
        "p.toml:2:5: var 'a': unknown var modifier ':upper' (allowed: :stem)");
  CHECK(error_of(kImport + "[[stage]]\nid = \"d\"\nuse = \"load-data\"\noutput = \"${data:base}\"\n") ==
        "p.toml:13:10: unknown var modifier ':base' (allowed: :stem) in 'output' of stage 'd'");
}

TEST_CASE("pipeline: unknown and ambiguous components") {
  CHECK(error_of("[[stage]]\nid = \"c\"\nuse = \"maxx\"\n") ==
        "p.toml:3:7: stage 'c': unknown component 'maxx' (did you mean calibrator:max?)");
  CHECK(error_of("[[stage]]\nid = \"c\"\nuse = \"quantum-magic\"\n") ==
        "p.toml:3:7: stage 'c': unknown component 'quantum-magic' (see 'qflow plugins' for the installed components)");
  CHECK(error_of("[[stage]]\nid = \"c\"\nuse = \"pass:max\"\n") ==
        "p.toml:3:7: stage 'c': unknown pass 'max' (see 'qflow plugins' for the installed components)");
  CHECK(error_of("[[stage]]\nid = \"c\"\nuse = \"shape:max\"\n") ==
        "p.toml:3:7: stage 'c': unknown component kind 'shape' in 'shape:max' (kinds: observer, calibrator, pass, target-check, target-estimate, target-lower, target-verify)");
  // verify became a target stage: the old spelling points at it.
  CHECK(error_of("[[stage]]\nid = \"c\"\nuse = \"verify\"\n") ==
        "p.toml:3:7: stage 'c': unknown component 'verify' (did you mean target-verify:named or target-verify:npu?)");
  CHECK(error_of("[[stage]]\nid = \"c\"\nuse = \"minmax\"\n") ==
        "p.toml:3:7: stage 'c': 'minmax' names components of several kinds; write 'observer:minmax' or 'calibrator:minmax'");
}

TEST_CASE("pipeline: options are checked against the declaration") {
  CHECK(error_of(kImport + "[[stage]]\nid = \"b\"\nuse = \"bpu\"\ninputs = { model = \"import.model\" }\n"
                           "options = { platfrom = \"nash\" }\n") ==
        "p.toml:14:24: stage 'b': option 'platfrom' is not declared by pass 'bpu'; did you mean 'platform'?");
  CHECK(error_of(kImport + "[[stage]]\nid = \"b\"\nuse = \"bpu\"\ninputs = { model = \"import.model\" }\n"
                           "options = { platform = 5 }\n") ==
        "p.toml:14:24: stage 'b': option 'platform' of pass 'bpu' expects string, got int");
  CHECK(error_of(kImport + "[[stage]]\nid = \"d\"\nuse = \"dead-code-elimination\"\ninputs = { model = \"import.model\" }\n"
                           "options = { level = 1 }\n") ==
        "p.toml:14:21: stage 'd': option 'level' is not declared by pass 'dead-code-elimination' (it takes no options)");
  CHECK(error_of("[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n") == "p.toml:2:6: stage 'i': import-onnx needs option 'path'");
  // A required option written as one var reference names the var to set.
  const std::string from_var = "[vars]\nmodel = \"\"\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\noptions = { path = \"${model}\" }\n";
  CHECK(error_of(from_var) == "p.toml:4:6: stage 'i': import-onnx needs option 'path' (var 'model' is empty: --set model=...)");
  CHECK(error_of(from_var, {"model="}) ==
        "p.toml:4:6: stage 'i': import-onnx needs option 'path' (var 'model' is empty: --set model=...)");
  // An int is a valid float; the resolved value is a double.
  const Pipeline p = resolved(
      "[[stage]]\nid = \"c\"\nuse = \"calibrator:max\"\ninputs = { statistics = \"s.statistics\" }\n"
      "options = { percentile = 99 }\n[[stage]]\nid = \"s\"\nuse = \"observer:minmax\"\n"
      "inputs = { model = \"i\", dataset = \"d\" }\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n"
      "options = { path = \"m.onnx\" }\n[[stage]]\nid = \"d\"\nuse = \"load-data\"\noptions = { path = \"d.npy\" }\n");
  CHECK(std::get<double>(p.stages[0].options.at("percentile").value) == 99.0);
  CHECK(p.order.back() == 0);
}

TEST_CASE("pipeline: inputs are checked against ports, references and types") {
  const std::string base = kImport + R"(
[[stage]]
id = "data"
use = "load-data"
options = { path = "${data}" }

[[stage]]
id = "observe"
use = "observer:minmax"
inputs = { model = "import.model", dataset = "data.dataset" }
)";
  CHECK(error_of(base + "[[stage]]\nid = \"calibrate\"\nuse = \"max\"\ninputs = { statistics = \"observe.statistics\", model = \"observe.statistics\" }\n") ==
        "p.toml:23:55: input 'model' of stage 'calibrate' expects model, 'observe.statistics' is statistics");
  CHECK(error_of(base + "[[stage]]\nid = \"calibrate\"\nuse = \"max\"\ninputs = { statistics = \"observer.statistics\" }\n") ==
        "p.toml:23:25: input 'statistics' of stage 'calibrate': no stage 'observer' (stages: import, data, observe, calibrate)");
  CHECK(error_of(base + "[[stage]]\nid = \"calibrate\"\nuse = \"max\"\ninputs = { statistics = \"observe.stats\" }\n") ==
        "p.toml:23:25: input 'statistics' of stage 'calibrate': stage 'observe' has no output 'stats' (outputs: statistics)");
  CHECK(error_of(base + "[[stage]]\nid = \"calibrate\"\nuse = \"max\"\ninputs = { stats = \"observe\" }\n") ==
        "p.toml:23:20: stage 'calibrate': calibrator 'max' has no input 'stats' (inputs: dataset, model, statistics)");
  CHECK(error_of(base + "[[stage]]\nid = \"q\"\nuse = \"quantize\"\ninputs = { model = \"import\" }\n") ==
        "p.toml:21:6: stage 'q': missing input 'qparams' (quantize needs model and qparams)");
  CHECK(error_of(kImport + "[[stage]]\nid = \"o\"\nuse = \"observer:minmax\"\ninputs = { model = \"import.model\" }\n") ==
        "p.toml:11:6: stage 'o': missing input 'dataset' (observer 'minmax' needs dataset and model)");
  CHECK(error_of(kImport + "[[stage]]\nid = \"o\"\nuse = \"dead-code-elimination\"\ninputs = { model = \"import.model.x\" }\n") ==
        "p.toml:13:20: input 'model' of stage 'o' must be \"stage-id.port\" or \"stage-id\", got 'import.model.x'");
}

TEST_CASE("pipeline: a cycle names its stages") {
  CHECK(error_of(kImport + R"(
[[stage]]
id = "a"
use = "dead-code-elimination"
inputs = { model = "c.model" }

[[stage]]
id = "b"
use = "dead-code-elimination"
inputs = { model = "a.model" }

[[stage]]
id = "c"
use = "dead-code-elimination"
inputs = { model = "b.model" }
)") == "p.toml:12:6: stages 'a', 'b' and 'c' form a cycle");
  CHECK(error_of("[[stage]]\nid = \"a\"\nuse = \"dead-code-elimination\"\ninputs = { model = \"a\" }\n") ==
        "p.toml:2:6: stage 'a' depends on itself");
}

TEST_CASE("pipeline: two stages may not write the same file") {
  CHECK(error_of(kImport + R"(
[[stage]]
id = "a"
use = "dead-code-elimination"
inputs = { model = "import.model" }
output = "same.onnx"

[[stage]]
id = "b"
use = "dead-code-elimination"
inputs = { model = "import.model" }
output = "same.onnx"
)") == "p.toml:21:10: stages 'a' and 'b' both write 'same.onnx' (give one an 'output')");
}

TEST_CASE("pipeline: ${var} substitution keeps the type of a whole reference") {
  const Pipeline p = resolved(R"([vars]
levels = 4
platform = "bayes"
[[stage]]
id = "i"
use = "import-onnx"
options = { path = "m-$${x}-${levels}.onnx" }
[[stage]]
id = "b"
use = "bpu"
inputs = { model = "i" }
options = { levels = "${levels}", platform = "${platform}" }
output = "${platform}.hbm"
)");
  CHECK(std::get<std::string>(p.stages[0].options.at("path").value) == "m-${x}-4.onnx");
  CHECK(std::get<int64_t>(p.stages[1].options.at("levels").value) == 4);
  CHECK(p.stages[1].output == "bayes.hbm");
}

TEST_CASE("pipeline: --set overrides vars and stage options, and refuses unknown names") {
  const std::string text = std::string(kHeader) + R"(levels = 2
[[stage]]
id = "i"
use = "import-onnx"
options = { path = "${model}" }
[[stage]]
id = "b"
use = "bpu"
inputs = { model = "i" }
options = { levels = "${levels}" }
)";
  const Pipeline p = resolved(text, {"model=other.onnx", "levels=7", "b.platform=bayes", "b.tags=x,y"});
  CHECK(std::get<std::string>(p.stages[0].options.at("path").value) == "other.onnx");
  CHECK(std::get<int64_t>(p.stages[1].options.at("levels").value) == 7);
  CHECK(std::get<std::string>(p.stages[1].options.at("platform").value) == "bayes");
  CHECK(std::get<std::vector<std::string>>(p.stages[1].options.at("tags").value) == std::vector<std::string>{"x", "y"});
  CHECK(error_of(text, {"modle=x"}) == "--set modle=x: the pipeline has no var 'modle' (vars: data, levels, model, name)");
  CHECK(error_of(text, {"levels=many"}) == "--set levels=many: var 'levels': expects int, got 'many'");
  CHECK(error_of(text, {"x.platform=a"}) == "--set x.platform=a: no stage 'x' (stages: i, b)");
  CHECK(error_of(text, {"b.platfrom=a"}) ==
        "--set b.platfrom=a: option 'platfrom' is not declared by pass 'bpu'; did you mean 'platform'?");
  CHECK(error_of(text, {"b.levels=1.5"}) == "--set b.levels=1.5: option 'levels': expects int, got '1.5'");
  CHECK(error_of(text, {"novalue"}) == "--set novalue: expected VAR=VALUE or STAGE.OPTION=VALUE");
}

TEST_CASE("pipeline: target stages take the target's options, lower adds `name`, outputs are typed") {
  const Pipeline p = resolved(kImport + R"(
[[stage]]
id = "check"
use = "target-check:npu"
inputs = { model = "import.model" }
options = { platform = "gen2" }

[[stage]]
id = "lower"
use = "target-lower:npu"
inputs = { model = "import.model" }
options = { name = "${name}" }

[[stage]]
id = "verify"
use = "target-verify:npu"
inputs = { model = "import.model", deployable = "lower.deployable", dataset = "data.dataset" }

[[stage]]
id = "data"
use = "load-data"
options = { path = "${data}" }

[[stage]]
id = "report"
use = "report"
inputs = { check = "check.report" }
)");
  CHECK(p.stages[1].kind == StageKind::TargetCheck);
  CHECK(p.stages[1].component == "npu");
  CHECK(p.stages[1].output == "model_check_result.json");
  CHECK(std::get<std::string>(p.stages[1].options.at("platform").value) == "gen2");
  CHECK(canonical_use(p.stages[1]) == "target-check:npu");
  CHECK(p.stages[2].kind == StageKind::TargetLower);
  CHECK(p.stages[2].output_type == ArtifactType::Deployable);
  CHECK(p.stages[2].output == "lower.deployable.json");
  CHECK(std::get<std::string>(p.stages[2].options.at("name").value) == "net");
  CHECK(std::get<std::string>(p.stages[2].options.at("platform").value) == "gen1");

  CHECK(error_of(kImport + "[[stage]]\nid = \"c\"\nuse = \"target-check:npu\"\ninputs = { model = \"import.model\" }\n"
                           "options = { name = \"x\" }\n")
            .find("option 'name' is not declared") != std::string::npos);
  CHECK(error_of(kImport + "[[stage]]\nid = \"l\"\nuse = \"target-lower:named\"\ninputs = { model = \"import.model\" }\n") ==
        "p.toml:12:7: stage 'l': target 'named' declares option 'name', which the target-lower stage itself takes");
  CHECK(error_of(kImport + "[[stage]]\nid = \"l\"\nuse = \"target-lower:npv\"\ninputs = { model = \"import.model\" }\n") ==
        "p.toml:12:7: stage 'l': unknown target 'npv' (did you mean target-lower:npu?)");
  // A target is only reached through a target stage.
  CHECK(error_of(kImport + "[[stage]]\nid = \"n\"\nuse = \"npu\"\ninputs = { model = \"import.model\" }\n")
            .find("unknown component 'npu'") != std::string::npos);
}

}  // namespace qflow
