// The schema registry behind qflow's libonnx checks: libonnx's schemas plus copies of older
// ones under the opset-18 names and signatures, and the few newer schemas that libonnx 1.12
// does not know (DFT-20, GroupNormalization-18/21).
#include "framework/onnx/onnx_schemas.h"

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <onnx/checker.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/defs/tensor_proto_util.h>

namespace qflow {

namespace {

using onnx::AttributeProto;
using onnx::OpSchema;

// A scalar int64 input's value when it is a constant, else nullopt.
std::optional<int64_t> constant_scalar(onnx::InferenceContext& ctx, size_t index) {
  if (ctx.getNumInputs() <= index) return std::nullopt;
  const onnx::TensorProto* t = ctx.getInputData(index);
  if (!t) return std::nullopt;
  std::vector<int64_t> v = t->data_type() == onnx::TensorProto::INT32
                               ? [&] { auto i32 = onnx::ParseData<int32_t>(t); return std::vector<int64_t>(i32.begin(), i32.end()); }()
                               : onnx::ParseData<int64_t>(t);
  if (v.size() != 1) return std::nullopt;
  return v[0];
}

// DFT-20: DFT-17 with the axis as input 2 (default -2).
OpSchema dft_20() {
  OpSchema schema;
  schema.SetName("DFT").SetDomain(onnx::ONNX_DOMAIN).SinceVersion(20)
      .Attr("inverse", "Whether to perform the inverse discrete Fourier transform.", AttributeProto::INT,
            static_cast<int64_t>(0))
      .Attr("onesided", "One-sided spectrum (RFFT) or signal (IRFFT).", AttributeProto::INT, static_cast<int64_t>(0))
      .Input(0, "input", "Signal, real [..., 1] or complex [..., 2].", "T1")
      .Input(1, "dft_length", "Length of the transform.", "T2", OpSchema::Optional)
      .Input(2, "axis", "Axis of the transform (default -2).", "tensor(int64)", OpSchema::Optional)
      .Output(0, "output", "The transform.", "T1")
      .TypeConstraint("T1", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"}, "Float types.")
      .TypeConstraint("T2", {"tensor(int32)", "tensor(int64)"}, "Integer types.")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (!onnx::hasInputShape(ctx, 0)) return;
        const auto& in = onnx::getInputShape(ctx, 0);
        const int rank = in.dim_size();
        if (rank < 2) return;
        const bool inverse = onnx::getAttribute(ctx, "inverse", int64_t{0}) != 0;
        const bool onesided = onnx::getAttribute(ctx, "onesided", int64_t{0}) != 0;
        const bool has_axis = ctx.getNumInputs() > 2 && ctx.getInputType(2);
        std::optional<int64_t> axis = has_axis ? constant_scalar(ctx, 2) : std::optional<int64_t>(-2);
        if (axis && *axis < 0) *axis += rank;
        const bool has_length = ctx.getNumInputs() > 1 && ctx.getInputType(1);
        const std::optional<int64_t> length = has_length ? constant_scalar(ctx, 1) : std::nullopt;
        auto* out = onnx::getOutputShape(ctx, 0);
        for (int i = 0; i < rank; ++i) {
          auto* dim = out->add_dim();
          if (i == rank - 1) {
            dim->set_dim_value(onesided && inverse ? 1 : 2);
          } else if (!axis) {
            continue;  // unknown axis: every signal dimension may change
          } else if (i != *axis) {
            *dim = in.dim(i);
          } else {
            std::optional<int64_t> n = length;
            if (!has_length && in.dim(i).has_dim_value())
              n = onesided && inverse ? 2 * (in.dim(i).dim_value() - 1) : in.dim(i).dim_value();
            if (n) dim->set_dim_value(onesided && !inverse ? *n / 2 + 1 : *n);
          }
        }
      });
  schema.Finalize();
  return schema;
}

// GroupNormalization: 18 with scale and bias per group, 21 per channel plus stash_type.
OpSchema group_normalization(int version) {
  OpSchema schema;
  schema.SetName("GroupNormalization").SetDomain(onnx::ONNX_DOMAIN).SinceVersion(version)
      .Attr("epsilon", "The epsilon value to use to avoid division by zero.", AttributeProto::FLOAT, 1e-5f)
      .Attr("num_groups", "The number of groups of channels.", AttributeProto::INT, true)
      .Input(0, "X", "Input data tensor (N x C x D1 ... Dn).", "T")
      .Input(1, "scale", version >= 21 ? "Scale per channel." : "Scale per group.", "T")
      .Input(2, "bias", version >= 21 ? "Bias per channel." : "Bias per group.", "T")
      .Output(0, "Y", "The output tensor of the same shape as X.", "T")
      .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"}, "Float types.")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  if (version >= 21)
    schema.Attr("stash_type", "The floating-point precision of the statistics.", AttributeProto::INT,
                static_cast<int64_t>(1));
  schema.Finalize();
  return schema;
}

class ExtendedSchemaRegistry final : public onnx::ISchemaRegistry {
 public:
  ExtendedSchemaRegistry() {
    // ReduceSum-13 already has the signature every Reduce* op took at 18 (keepdims,
    // noop_with_empty_axes, optional axes input), and its shape inference reads that input.
    if (const onnx::OpSchema* reduce_sum = onnx::OpSchemaRegistry::Schema("ReduceSum", 13, onnx::ONNX_DOMAIN)) {
      for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                             "ReduceMin", "ReduceProd", "ReduceSumSquare"}) {
        onnx::OpSchema schema = *reduce_sum;
        schema.SetName(op).SinceVersion(18);
        add(std::move(schema));
      }
    }
    // Split-18 is Split-13 plus num_outputs; Split-13's inference splits evenly over the outputs.
    if (const onnx::OpSchema* split = onnx::OpSchemaRegistry::Schema("Split", 13, onnx::ONNX_DOMAIN)) {
      onnx::OpSchema schema = *split;
      schema.SinceVersion(18).Attr("num_outputs", "Number of outputs to split parts of the tensor into.",
                                   onnx::AttributeProto::INT, false);
      add(std::move(schema));
    }
    add(dft_20());
    // libonnx 1.12 has no GroupNormalization at all (ONNX added it at opset 18).
    add(group_normalization(18));
    add(group_normalization(21));
  }

  const onnx::OpSchema* GetSchema(const std::string& key, const int max_inclusive_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* base = onnx::OpSchemaRegistry::Schema(key, max_inclusive_version, domain);
    if (domain != onnx::ONNX_DOMAIN) return base;
    auto it = extra_.find(key);
    if (it == extra_.end()) return base;
    const onnx::OpSchema* best = base;
    for (const auto& [version, schema] : it->second)
      if (version <= max_inclusive_version && (!best || version > best->SinceVersion())) best = &schema;
    return best;
  }

 private:
  void add(onnx::OpSchema schema) {
    const int version = schema.SinceVersion();
    const std::string name = schema.Name();
    extra_[name].emplace(version, std::move(schema));
  }

  std::unordered_map<std::string, std::map<int, onnx::OpSchema>> extra_;
};

}  // namespace

const onnx::ISchemaRegistry* onnx_schemas() {
  static const ExtendedSchemaRegistry registry;
  return &registry;
}

// onnx::checker::check_model(const ModelProto&) of libonnx 1.12 with the registry swapped:
// the model-level checks, then the graph and the model-local functions.
void check_model_proto(const onnx::ModelProto& model) {
  using onnx::checker::ValidationError;
  if (!model.ir_version()) throw ValidationError("The model does not have an ir_version set properly.");
  if (model.ir_version() > onnx::IR_VERSION) throw ValidationError("Your model ir_version is higher than the checker's.");
  std::unordered_set<std::string> keys;
  for (const auto& entry : model.metadata_props())
    if (!keys.insert(entry.key()).second) throw ValidationError("Your model has duplicate keys in metadata_props.");
  onnx::checker::CheckerContext ctx;
  ctx.set_schema_registry(onnx_schemas());
  ctx.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> opset_imports;
  for (const auto& opset : model.opset_import()) opset_imports[opset.domain()] = static_cast<int>(opset.version());
  if (model.ir_version() >= 3) {
    if (opset_imports.empty()) throw ValidationError("model with IR version >= 3 must specify opset_import for ONNX");
  } else if (opset_imports.empty()) {
    opset_imports[onnx::ONNX_DOMAIN] = 1;
  } else {
    throw ValidationError("model with IR version < 3 cannot have opset_import specified");
  }
  ctx.set_opset_imports(opset_imports);
  onnx::checker::LexicalScopeContext lex_ctx;
  onnx::checker::check_graph(model.graph(), ctx, lex_ctx);
  if (ctx.get_ir_version() >= 0x00000008) onnx::checker::check_model_local_functions(model, ctx, lex_ctx);
}

}  // namespace qflow
