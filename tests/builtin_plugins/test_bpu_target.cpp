// Tests of the bpu target component: one lowering emits both deployable files, the partition
// names the failed constraint, the check and performance sections come as JSON and text.
#include <doctest/doctest.h>

#include "qflow/core/json.h"
#include "plugins/backends/bpu/bpu_target.h"
#include "plugins/backends/bpu/qdq_model.h"
#include "plugins/backends/bpu/bc_codec.h"
#include "qflow/version.h"
#include "qflow/runtime/hbm_codec.h"
#include "test_bpu_lowering_helpers.h"

namespace qflow {
namespace {

using namespace lowering_test;
using bpu_test::backend_for;

Options platform_options(const std::string& platform) {
  Options options;
  options.set("platform", platform);
  options.set("platform-dir", std::string(QFLOW_BPU_PLATFORM_DIR));
  options.set("run-on-cpu", std::vector<std::string>{});
  options.set("run-on-bpu", std::vector<std::string>{});
  return options;
}

std::unique_ptr<Target> target_for(const std::string& platform) {
  auto target = BpuTarget::create(platform_options(platform));
  REQUIRE_MESSAGE(target.has_value(), target.status().message());
  return std::move(target).value();
}

}  // namespace

TEST_CASE("bpu target: one lowering emits the .bc and the .hbm of the lowered program") {
  QdqGraph q = big_kernel_model();
  auto files = target_for("bernoulli2")->lower(q.model);
  REQUIRE_MESSAGE(files.has_value(), files.status().message());
  REQUIRE(files->size() == 2);
  CHECK((*files)[0].role == "bc");
  CHECK((*files)[0].suffix == "_quantized_model.bc");
  CHECK((*files)[1].role == "hbm");
  CHECK((*files)[1].suffix == ".hbm");
  const lowered::Model program = lower(q.model, backend_for("bernoulli2"));
  auto bc = encode_bc(program);
  REQUIRE(bc.has_value());
  CHECK(*bc == (*files)[0].bytes);
  auto hbm = lowered::encode_hbm(program, QFLOW_VERSION_STRING);
  REQUIRE(hbm.has_value());
  CHECK(std::string(hbm->begin(), hbm->end()) == (*files)[1].bytes);
}

TEST_CASE("bpu target: a float model is checked without quantization; a lowering needs the PTQ model") {
  QdqGraph q = big_kernel_model();
  std::unique_ptr<Target> target = target_for("bernoulli2");
  auto view = read_qdq_model(q.model);
  REQUIRE(view.has_value());
  auto check = target->check(view->view);
  REQUIRE_MESSAGE(check.has_value(), check.status().message());
  CHECK(check->text.find("big") != std::string::npos);
  CHECK_FALSE(target->lower(view->view).has_value());
}

TEST_CASE("bpu target: the partition and the check section name the failed constraint") {
  QdqGraph q = big_kernel_model();
  std::unique_ptr<Target> target = target_for("bernoulli2");
  auto nodes = target->partition(q.model);
  REQUIRE_MESSAGE(nodes.has_value(), nodes.status().message());
  REQUIRE(nodes->size() == 3);
  for (const NodeCapability& node : *nodes) {
    CAPTURE(node.node);
    CHECK(node.supported == (node.node != "big"));
    if (node.node == "big") CHECK(node.reason.find("kernel 9x9") != std::string::npos);
  }
  // nash runs Conv kernels up to 31x31: the same model runs whole on the BPU.
  auto on_nash = target_for("nash")->partition(q.model);
  REQUIRE(on_nash.has_value());
  for (const NodeCapability& node : *on_nash) CHECK(node.supported);

  auto check = target->check(q.model);
  REQUIRE_MESSAGE(check.has_value(), check.status().message());
  auto doc = parse_json(check->json, "check");
  REQUIRE_MESSAGE(doc.has_value(), doc.status().message());
  const Json* listed = json_member(*doc, "nodes");
  REQUIRE(listed);
  REQUIRE(listed->size() == 3);
  for (const Json& node : *listed)
    CHECK(node.at("placement") == (node.at("name") == "big" ? "cpu" : "bpu"));
  CHECK(check->text.find("big") != std::string::npos);
}

}  // namespace qflow
