#include "bpu_deployed.h"

#include <span>
#include <vector>

#include "bc_codec.h"
#include "qflow/runtime/hbm_codec.h"
#include "qflow/runtime.h"
#include "qflow/runtime/executor.h"

namespace qflow {
namespace {

Status element_count_error(const std::string& what, const std::string& name, int64_t given, int64_t expected) {
  return invalid_input(what + ": input '" + name + "' has " + std::to_string(given) + " elements, expected " +
                       std::to_string(expected));
}

Tensor float_tensor(const std::vector<int64_t>& shape, const float* data) {
  Tensor t(DType::Float32, Shape(shape.begin(), shape.end()));
  std::copy(data, data + t.numel(), t.data<float>());
  return t;
}

class BcModel final : public DeployedModel {
 public:
  explicit BcModel(lowered::Executor executor) : executor_(std::move(executor)) {}
  std::string description() const override { return ".bc simulator"; }
  std::vector<DeployedTensor> inputs() const override { return tensors(executor_.model().inputs); }
  std::vector<DeployedTensor> outputs() const override { return tensors(executor_.model().outputs); }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    const lowered::Model& m = executor_.model();
    if (inputs.size() != m.inputs.size())
      return invalid_input(".bc simulator: " + std::to_string(inputs.size()) + " inputs given, the model has " +
                           std::to_string(m.inputs.size()));
    std::vector<std::span<const float>> spans;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const lowered::Tensor& t = m.tensors[static_cast<std::size_t>(m.inputs[i])];
      const int64_t expected = element_count(t.shape);
      if (inputs[i].dtype() != DType::Float32 || inputs[i].numel() != expected)
        return element_count_error(".bc simulator", t.name, inputs[i].numel(), expected);
      spans.emplace_back(inputs[i].data<float>(), static_cast<std::size_t>(inputs[i].numel()));
    }
    std::vector<std::vector<float>> flat;
    const Status status = executor_.run(spans, flat);
    if (!status) return invalid_input(".bc simulator: " + status.message());
    std::vector<Tensor> out;
    for (std::size_t o = 0; o < flat.size(); ++o)
      out.push_back(float_tensor(m.tensors[static_cast<std::size_t>(m.outputs[o])].shape, flat[o].data()));
    return out;
  }

 private:
  static int64_t element_count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::vector<DeployedTensor> tensors(const std::vector<int32_t>& indices) const {
    std::vector<DeployedTensor> out;
    for (int32_t i : indices) {
      const lowered::Tensor& t = executor_.model().tensors[static_cast<std::size_t>(i)];
      out.push_back({t.name, Shape(t.shape.begin(), t.shape.end()),
                     t.type == lowered::ElemType::u8 ? DType::UInt8 : DType::Float32});
    }
    return out;
  }
  lowered::Executor executor_;
};

struct RtModelDeleter {
  void operator()(qflow_rt_model* model) const { qflow_rt_free(model); }
};

class HbmModel final : public DeployedModel {
 public:
  HbmModel(qflow_rt_model* handle, const std::vector<bool>& frames) : handle_(handle) {
    for (std::size_t i = 0; i < qflow_rt_input_count(handle); ++i) {
      inputs_.push_back(info(i, true));
      inputs_.back().frame = i < frames.size() && frames[i];
    }
    for (std::size_t o = 0; o < qflow_rt_output_count(handle); ++o) outputs_.push_back(info(o, false));
  }
  std::string description() const override { return ".hbm runtime"; }
  std::vector<DeployedTensor> inputs() const override { return tensors(inputs_); }
  std::vector<DeployedTensor> outputs() const override { return tensors(outputs_); }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    if (inputs.size() != inputs_.size())
      return invalid_input(".hbm runtime: " + std::to_string(inputs.size()) + " inputs given, the model has " +
                           std::to_string(inputs_.size()));
    std::vector<const float*> feeds;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const int64_t expected = static_cast<int64_t>(inputs_[i].elements);
      if (inputs[i].dtype() != DType::Float32 || inputs[i].numel() != expected)
        return element_count_error(".hbm runtime", inputs_[i].name, inputs[i].numel(), expected);
      feeds.push_back(inputs[i].data<float>());
    }
    std::vector<Tensor> out;
    std::vector<float*> targets;
    for (const Info& o : outputs_) {
      out.emplace_back(DType::Float32, Shape(o.shape.begin(), o.shape.end()));
      targets.push_back(out.back().data<float>());
    }
    if (qflow_rt_run(handle_.get(), feeds.data(), targets.data()) != QFLOW_RT_OK)
      return invalid_input(std::string(".hbm runtime: ") + qflow_rt_last_error());
    return out;
  }

 private:
  struct Info {
    std::string name;
    std::vector<int64_t> shape;
    std::size_t elements = 0;
    bool frame = false;  // a uint8 frame (docs/input-types.md)
  };
  Info info(std::size_t index, bool input) const {
    qflow_rt_tensor_info t{};
    if (input) qflow_rt_input_info(handle_.get(), index, &t);
    else qflow_rt_output_info(handle_.get(), index, &t);
    return {t.name ? t.name : "", std::vector<int64_t>(t.shape, t.shape + t.rank), t.element_count};
  }
  static std::vector<DeployedTensor> tensors(const std::vector<Info>& infos) {
    std::vector<DeployedTensor> out;
    for (const Info& i : infos)
      out.push_back({i.name, Shape(i.shape.begin(), i.shape.end()), i.frame ? DType::UInt8 : DType::Float32});
    return out;
  }
  std::unique_ptr<qflow_rt_model, RtModelDeleter> handle_;
  std::vector<Info> inputs_, outputs_;
};

// Float train-format samples in, frames to the file, the frame's float tensor to the reference.
class FrameInputModel final : public DeployedModel {
 public:
  FrameInputModel(std::unique_ptr<DeployedModel> inner, std::vector<InputType> types)
      : inner_(std::move(inner)), types_(std::move(types)) {}
  std::string description() const override { return inner_->description(); }
  std::vector<DeployedTensor> inputs() const override {
    std::vector<DeployedTensor> out = inner_->inputs();
    for (DeployedTensor& t : out)
      if (const InputType* type = find(t.name)) t.shape = Shape(type->train_shape.begin(), type->train_shape.end());
    return out;
  }
  std::vector<DeployedTensor> outputs() const override { return inner_->outputs(); }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> frames, convert(inputs, false));
    return inner_->run(frames);
  }
  Expected<std::vector<Tensor>> reference_inputs(const std::vector<Tensor>& inputs) const override {
    return convert(inputs, true);
  }

 private:
  const InputType* find(const std::string& name) const {
    for (const InputType& t : types_)
      if (t.input == name) return &t;
    return nullptr;
  }
  // Each converted input: its frame, or (reference) the float tensor of that frame.
  Expected<std::vector<Tensor>> convert(const std::vector<Tensor>& inputs, bool reference) const {
    const std::vector<DeployedTensor> names = inner_->inputs();
    if (inputs.size() != names.size())
      return invalid_input(description() + ": " + std::to_string(inputs.size()) + " inputs given, the model has " +
                           std::to_string(names.size()));
    std::vector<Tensor> out;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const InputType* type = find(names[i].name);
      if (!type) {
        out.push_back(inputs[i]);
        continue;
      }
      const Tensor sample = inputs[i].dtype() == DType::Float32 ? inputs[i] : inputs[i].cast(DType::Float32);
      int64_t expected = 1;
      for (int64_t d : type->train_shape) expected *= d;
      if (sample.numel() != expected)
        return element_count_error(description(), names[i].name, sample.numel(), expected);
      const std::vector<float> values(sample.data<float>(), sample.data<float>() + sample.numel());
      const std::vector<float> frame = train_to_frame(*type, values);
      if (reference) out.push_back(float_tensor(type->train_shape, frame_to_train(*type, frame).data()));
      else out.push_back(float_tensor(type->rt_shape, frame.data()));
    }
    return out;
  }
  std::unique_ptr<DeployedModel> inner_;
  std::vector<InputType> types_;
};

}  // namespace

Expected<std::unique_ptr<DeployedModel>> with_frame_inputs(std::unique_ptr<DeployedModel> model,
                                                           const InputTypeOptions& options) {
  if (!options.any()) return model;
  std::vector<std::pair<std::string, Shape>> frames;
  for (const DeployedTensor& t : model->inputs()) frames.emplace_back(t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()));
  QFLOW_ASSIGN_OR_RETURN(std::vector<InputType> types, resolve_input_types_of_frames(options, frames));
  if (types.empty()) return model;
  return std::unique_ptr<DeployedModel>(new FrameInputModel(std::move(model), std::move(types)));
}

Expected<std::unique_ptr<DeployedModel>> load_bc(const std::string& bytes) {
  Expected<lowered::Model> model =
      decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!model) return model.status();
  auto executor = lowered::Executor::create(std::move(model).value());
  if (!executor) return invalid_input(".bc: " + executor.message());
  return std::unique_ptr<DeployedModel>(new BcModel(std::move(executor).value()));
}

Expected<std::unique_ptr<DeployedModel>> load_hbm(const std::string& bytes) {
  qflow_rt_model* handle = nullptr;
  if (qflow_rt_load_memory(bytes.data(), bytes.size(), &handle) != QFLOW_RT_OK)
    return invalid_input(std::string(".hbm: ") + qflow_rt_last_error());
  // Which inputs are uint8 frames: the C API reports them as uint8 inputs of scale 1, which
  // a quantized input may be too; the program itself says.
  std::vector<bool> frames;
  Expected<lowered::Model> model =
      lowered::decode_hbm(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (model)
    for (const int32_t i : model->inputs) frames.push_back(model->tensors[static_cast<std::size_t>(i)].type == lowered::ElemType::u8);
  return std::unique_ptr<DeployedModel>(new HbmModel(handle, frames));
}

}  // namespace qflow
