// Pass lists: grammar, named pipelines expanded in place, options, and the errors a user sees.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "framework/pipeline/pass_list.h"

namespace qflow {

namespace {

ComponentCatalog catalog() {
  std::vector<ComponentInfo> components;
  components.push_back({ComponentKind::Pass, "constant-folding", "fold", {{"max-bytes", OptionType::Int, int64_t{64}, "cap"}}});
  components.push_back({ComponentKind::Pass, "fold-batchnorm", "bn", {}});
  components.push_back({ComponentKind::Pass, "dead-code-elimination", "dce", {}});
  components.push_back({ComponentKind::Pass, "cross-layer-equalization", "cle",
                        {{"iterations", OptionType::Int, int64_t{1}, "n"}, {"scale", OptionType::Float, 1.0, "s"}}});
  components.push_back({ComponentKind::Calibrator, "kl", "not a pass", {}});
  std::vector<PassPipelineInfo> pipelines = {
      {"cleanup", "fold and drop", "constant-folding, dead-code-elimination"},
      {"float-optimize", "everything", "cleanup,fold-batchnorm,dead-code-elimination"},
      {"loop-a", "includes loop-b", "fold-batchnorm,loop-b"},
      {"loop-b", "includes loop-a", "loop-a"}};
  return ComponentCatalog(std::move(components), std::move(pipelines));
}

std::vector<std::string> names(const std::vector<PassInvocation>& passes) {
  std::vector<std::string> out;
  for (const PassInvocation& pass : passes) out.push_back(pass.name);
  return out;
}

std::string error_of(const std::string& text) {
  Expected<std::vector<PassInvocation>> passes = expand_pass_list(text, catalog(), "passes");
  REQUIRE_FALSE(passes.has_value());
  return passes.status().message();
}

}  // namespace

TEST_CASE("pass list: names in order, spaces ignored, options typed") {
  Expected<std::vector<PassInvocation>> passes =
      expand_pass_list(" constant-folding<max-bytes=128> ,cross-layer-equalization< iterations=3 ; scale=0.5 >,"
                       "dead-code-elimination",
                       catalog(), "passes");
  REQUIRE_MESSAGE(passes.has_value(), passes.status().message());
  CHECK(names(*passes) == std::vector<std::string>{"constant-folding", "cross-layer-equalization", "dead-code-elimination"});
  CHECK((*passes)[0].options.get_int("max-bytes") == 128);
  CHECK((*passes)[1].options.get_int("iterations") == 3);
  CHECK((*passes)[1].options.get_float("scale") == 0.5);
  CHECK_FALSE((*passes)[2].options.has("max-bytes"));
  CHECK(pass_invocation_text((*passes)[1]) == "cross-layer-equalization<iterations=3;scale=0.5>");
  CHECK(pass_invocation_text((*passes)[2]) == "dead-code-elimination");
}

TEST_CASE("pass list: named pipelines expand in place, recursively, and remember where they came from") {
  Expected<std::vector<PassInvocation>> passes = expand_pass_list("float-optimize,fold-batchnorm", catalog(), "passes");
  REQUIRE_MESSAGE(passes.has_value(), passes.status().message());
  CHECK(names(*passes) == std::vector<std::string>{"constant-folding", "dead-code-elimination", "fold-batchnorm",
                                                   "dead-code-elimination", "fold-batchnorm"});
  CHECK((*passes)[0].pipeline == "float-optimize");
  CHECK((*passes)[3].pipeline == "float-optimize");
  CHECK((*passes)[4].pipeline.empty());
  const ComponentCatalog components = catalog();  // the pointers point into it
  const std::vector<const PassPipelineInfo*> used = pass_pipelines_used("fold-batchnorm,float-optimize", components);
  REQUIRE(used.size() == 2);
  CHECK(used[0]->name == "float-optimize");
  CHECK(used[1]->name == "cleanup");
}

TEST_CASE("pass list: errors name the item and suggest") {
  CHECK(error_of("constant-folding,fold-batchnrm") ==
        "passes: no pass or pass pipeline named 'fold-batchnrm' (did you mean 'fold-batchnorm'?)");
  CHECK(error_of("kl").find("passes: no pass or pass pipeline named 'kl' (available: cleanup, constant-folding,") == 0);
  CHECK(error_of("constant-folding<max-byte=1>").find("option 'max-byte' is not declared by pass 'constant-folding'; did you mean 'max-bytes'?") !=
        std::string::npos);
  CHECK(error_of("constant-folding<max-bytes=lots>").find("option 'max-bytes' of pass 'constant-folding'") !=
        std::string::npos);
  CHECK(error_of("cleanup<x=1>") == "passes: pass pipeline 'cleanup' takes no options (give them to its passes)");
  CHECK(error_of("loop-a") ==
        "passes (in pass pipeline 'loop-a') (in pass pipeline 'loop-b'): pass pipeline 'loop-a' includes itself "
        "(loop-a -> loop-b -> loop-a)");
  CHECK(error_of("") == "passes: the pass list is empty");
  CHECK(error_of("constant-folding,,dead-code-elimination").find("empty item") != std::string::npos);
  CHECK(error_of("constant-folding<max-bytes=1").find("'<' without '>'") != std::string::npos);
  CHECK(error_of("constant-folding<max-bytes=1>x").find("text after '>'") != std::string::npos);
}

}  // namespace qflow
