// Unit tests for the canonical pipeline form: round trip, quoting, and the files in pipelines/.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

ComponentCatalog catalog() {
  std::vector<ComponentInfo> components;
  components.push_back({ComponentKind::Observer, "minmax", "ranges", {}});
  components.push_back({ComponentKind::Calibrator, "max", "max scale",
                        {{"dtype", OptionType::String, std::string("int8"), "type"},
                         {"power-of-two", OptionType::Bool, false, "pow2"}}});
  components.push_back({ComponentKind::Pass, "dead-code-elimination", "dce", {}});
  components.push_back({ComponentKind::Pass, "bpu", "a pass with options of every type",
                        {{"platform", OptionType::String, std::string("nash"), "gen"},
                         {"platform-dir", OptionType::String, std::string(), "dir"},
                         {"scale", OptionType::Float, 0.1, "f"},
                         {"tags", OptionType::StringList, std::vector<std::string>{"a b", "c\"d"}, "tags"}}});
  return ComponentCatalog(std::move(components));
}

// The built-in components as the shipped pipelines use them (without options). Their real
// declarations are checked by the pipeline golden tests, which run the qflow binary.
ComponentCatalog shipped_catalog() {
  std::vector<ComponentInfo> components = catalog().components();
  for (const char* name : {"constant-folding", "shape-folding", "eliminate-identity", "fold-batchnorm",
                           "fuse-matmul-add", "fuse-hardswish", "fuse-hardsigmoid", "fuse-layernorm", "fuse-gelu",
                           "cross-layer-equalization", "strip-qdq", "float16-to-float32", "integer-to-float"})
    components.push_back({ComponentKind::Pass, name, "built-in pass", {}});
  components.push_back({ComponentKind::Pass, "adaround", "built-in pass", {}});
  components.push_back({ComponentKind::Observer, "histogram", "built-in observer", {}});
  for (const char* name : {"kl", "percentile", "mse", "mix", "auto", "load"})
    components.push_back({ComponentKind::Calibrator, name, "built-in calibrator", {}});
  components.push_back({ComponentKind::Target, "bpu", "built-in target",
                        {{"platform", OptionType::String, std::string("nash"), "platform"},
                         {"platform-dir", OptionType::String, std::string(), "platform folders"},
                         {"input-type-rt", OptionType::String, std::string("featuremap"), "input type"},
                         {"input-layout-rt", OptionType::String, std::string("nhwc"), "input layout"},
                         {"input-type-train", OptionType::String, std::string(), "train type"},
                         {"mean-value", OptionType::String, std::string(), "mean"},
                         {"scale-value", OptionType::String, std::string(), "scale"}}});
  // The passes plugin's named pass pipeline, as it registers it.
  std::vector<PassPipelineInfo> pipelines = {
      {"float-optimize", "built-in pass pipeline",
       "float16-to-float32,integer-to-float,constant-folding,shape-folding,eliminate-identity,fold-batchnorm,"
       "fuse-matmul-add,fuse-hardswish,fuse-hardsigmoid,fuse-layernorm,fuse-gelu,dead-code-elimination"}};
  return ComponentCatalog(std::move(components), std::move(pipelines));
}

std::string canonical(const std::string& text, const std::string& path = "p.toml",
                      const std::vector<std::string>& sets = {}, const ComponentCatalog& components = catalog()) {
  Expected<Pipeline> pipeline = parse_pipeline(text, path, sets);
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  const Status status = resolve_pipeline(*pipeline, components, sets);
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  return format_pipeline(*pipeline);
}

}  // namespace

TEST_CASE("pipeline canonical: defaults filled, vars substituted, kinds qualified") {
  const std::string text = R"([vars]
name = "n"
model = "m.onnx"
[[stage]]
id = "i"
use = "import-onnx"
options = { path = "${model}", name = "${name}" }
[[stage]]
id = "b"
use = "bpu"
inputs = { model = "i" }
output = "${name}.hbm"
)";
  CHECK(canonical(text) == R"([vars]
model = "m.onnx"
name = "n"

[[stage]]
id = "i"
use = "import-onnx"
options = { constant-inputs = "", infer-shapes = false, input-shape = "", min-opset = 0, name = "n", path = "m.onnx" }
output = "n_original_float_model.onnx"

[[stage]]
id = "b"
use = "pass:bpu"
inputs = { model = "i.model" }
options = { platform = "nash", platform-dir = "", scale = 0.1, tags = ["a b", "c\"d"] }
output = "n.hbm"
)");
}

TEST_CASE("pipeline canonical: the output parses back to itself, awkward values included") {
  const std::string text = "[vars]\nodd = \"$${not-a-ref} \\\"q\\\" \\t \\u0001 é $\"\nf = 1e300\ng = -0.0\n"
                           "[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n"
                           "options = { path = \"$$${odd}$\", name = \"x\" }\n"
                           "[[stage]]\nid = \"b\"\nuse = \"bpu\"\ninputs = { model = \"i\" }\n"
                           "options = { scale = \"${f}\", tags = [\"$${odd}\", \"\"] }\n";
  const std::string once = canonical(text);
  CHECK(canonical(once) == once);
  CHECK(once.find("path = \"$$$${not-a-ref} \\\"q\\\" \\t \\u0001 é $$$$\"") != std::string::npos);
  CHECK(once.find("scale = 1e+300") != std::string::npos);
}

TEST_CASE("pipeline canonical: plugins are made absolute against the pipeline's folder") {
  const std::string text = "plugins = [\"../lib/x.so\"]\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n"
                           "options = { path = \"m.onnx\" }\n";
  Expected<Pipeline> p = parse_pipeline(text, "/tmp/a/b/p.toml");
  REQUIRE(p.has_value());
  CHECK(p->plugins == std::vector<std::string>{"/tmp/a/lib/x.so"});
  const std::string once = canonical(text, "/tmp/a/b/p.toml");
  CHECK(canonical(once, "/elsewhere/q.toml") == once);
}

TEST_CASE("pipeline canonical: every file in pipelines/ round-trips") {
  const std::filesystem::path folder = std::filesystem::path(QFLOW_SOURCE_DIR) / "pipelines";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    CAPTURE(entry.path().string());
    // The deployment pipelines leave model and data empty: a run names them.
    Expected<Pipeline> pipeline = load_pipeline(entry.path().string());
    REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
    std::vector<std::string> sets;
    for (const auto& [name, var] : pipeline->vars)
      if (const auto* text = std::get_if<std::string>(&var.value); text && text->empty() && (name == "model" || name == "data"))
        sets.push_back(name + "=" + (name == "model" ? "m.onnx" : "d.npy"));
    pipeline = load_pipeline(entry.path().string(), sets);
    REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
    const Status status = resolve_pipeline(*pipeline, shipped_catalog());
    REQUIRE_MESSAGE(status.is_ok(), status.message());
    const std::string once = format_pipeline(*pipeline);
    CHECK(canonical(once, entry.path().string(), {}, shipped_catalog()) == once);
  }
  CHECK(files >= 2);
}

}  // namespace qflow
