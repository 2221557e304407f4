// target-verify: the PTQ model and every file of a lowering that its target runs on the host
// (Target::load), compared on the samples (framework/quant/deployed_verify.h).
#include <algorithm>

#include "framework/pipeline/stage_util.h"
#include "framework/distributed/share_units.h"
#include "framework/quant/deployed_verify.h"

namespace qflow {

Expected<StageResult> run_target_verify(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                        const ComponentRegistry& registry, const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, make_stage_target(stage, registry));
  const std::vector<TargetArtifact>& deployable = *inputs.at("deployable")->deployables;
  std::vector<RunnableFile> files;
  for (const std::string& role : target->runnable_roles()) {
    const auto file = std::find_if(deployable.begin(), deployable.end(),
                                   [&](const TargetArtifact& a) { return a.role == role; });
    if (file == deployable.end())
      return invalid_input("stage '" + stage.id + "': input 'deployable' has no '" + role + "' file, which target '" +
                           stage.component + "' runs");
    files.push_back({role, [target, file] { return target->load(file->role, file->bytes); }});
  }
  const int64_t limit = std::get<int64_t>(stage.options.at("limit").value);
  const Dataset& dataset = *inputs.at("dataset")->dataset;
  const ShardRange mine = my_slice(context.world, limit > 0 ? std::min(limit, dataset.count) : dataset.count);
  ProgressBar progress("stage '" + stage.id + "'", mine.end - mine.begin);
  QFLOW_ASSIGN_OR_RETURN(DeployedVerification verification,
                         verify_deployed(model, files, dataset, context.threads, limit, &progress, context.world));
  progress.finish();
  StageResult result;
  result.artifact.type = ArtifactType::Report;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, verification_json(verification));
  for (std::size_t f = 1; f < verification.roles.size(); ++f)
    for (const DeployedOutputCheck& output : verification.outputs)
      if (output.files[f].differing != 0)
        result.warnings.push_back("verify: output '" + output.name + "': the " + verification.descriptions[f] +
                                  " differs from the " + verification.descriptions[0] + " on " +
                                  std::to_string(output.files[f].differing) + " of " +
                                  std::to_string(output.elements * verification.samples) + " elements");
  return result;
}

}  // namespace qflow
