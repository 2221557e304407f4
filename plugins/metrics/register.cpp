// Entry point of libqflow_metrics: registers the built-in metrics with the host.
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"
#include "agreement_metric.h"
#include "top_k_metric.h"

namespace {

qflow::Status register_metrics(qflow::ComponentRegistrar& registrar) {
  for (int64_t k : {int64_t{1}, int64_t{5}})
    QFLOW_RETURN_IF_ERROR(registrar.add_metric(qflow::TopKMetric::info(k), [k](const qflow::Options& options) {
      return qflow::TopKMetric::create(k, options);
    }));
  using Decoder = qflow::AgreementMetric::Decoder;
  for (Decoder decoder : {Decoder::Argmax, Decoder::Ctc})
    QFLOW_RETURN_IF_ERROR(registrar.add_metric(
        qflow::AgreementMetric::info(decoder),
        [decoder](const qflow::Options& options) { return qflow::AgreementMetric::create(decoder, options); }));
  return qflow::Status::ok();
}

}  // namespace

QFLOW_PLUGIN("metrics", "0.1.0", register_metrics)
