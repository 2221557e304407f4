// verify: the PTQ model, the .bc simulator and the .hbm runtime compared on the samples. The
// two files are the roles `bc` and `hbm` of a lowering's `deployable`.
#include "framework/pipeline/stage_util.h"

#include "framework/quant/lowered_verify.h"
#include "qflow/lowered/bc.h"

namespace qflow {

namespace {

// The bytes of the deployable file of `role`.
Expected<const std::string*> lowered_input(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                           const std::string& role) {
  for (const TargetArtifact& file : *inputs.at("deployable")->deployables)
    if (file.role == role) return &file.bytes;
  return invalid_input("stage '" + stage.id + "': input 'deployable' has no '" + role +
                       "' file (verify compares a target's .bc simulator with its .hbm runtime)");
}

}  // namespace

Expected<StageResult> run_verify(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                 const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(const std::string* bc_input, lowered_input(stage, inputs, "bc"));
  QFLOW_ASSIGN_OR_RETURN(const std::string* hbm_input, lowered_input(stage, inputs, "hbm"));
  const std::string& bc_bytes = *bc_input;
  const std::string& hbm_bytes = *hbm_input;
  Expected<lowered::Model> bc = decode_bc(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bc_bytes.data()), bc_bytes.size()));
  if (!bc) return bc.status().with_context("input 'bc' of stage '" + stage.id + "'");
  const int64_t limit = std::get<int64_t>(stage.options.at("limit").value);
  QFLOW_ASSIGN_OR_RETURN(
      LoweredVerification verification,
      verify_lowered(model, *bc, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(hbm_bytes.data()), hbm_bytes.size()),
                     *inputs.at("dataset")->dataset, context.threads, limit));
  StageResult result;
  result.artifact.type = ArtifactType::Report;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, verification_json(verification));
  for (const LoweredOutputCheck& output : verification.outputs)
    if (output.exact_matches != output.compared)
      result.warnings.push_back("verify: output '" + output.name + "': the .hbm runtime differs from the .bc simulator on " +
                                std::to_string(output.compared - output.exact_matches) + " of " +
                                std::to_string(output.compared) + " elements");
  return result;
}

}  // namespace qflow
