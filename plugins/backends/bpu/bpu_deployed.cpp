#include "bpu_deployed.h"

#include <span>
#include <vector>

#include "bc_codec.h"
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
      out.push_back({t.name, Shape(t.shape.begin(), t.shape.end())});
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
  explicit HbmModel(qflow_rt_model* handle) : handle_(handle) {
    for (std::size_t i = 0; i < qflow_rt_input_count(handle); ++i) inputs_.push_back(info(i, true));
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
  };
  Info info(std::size_t index, bool input) const {
    qflow_rt_tensor_info t{};
    if (input) qflow_rt_input_info(handle_.get(), index, &t);
    else qflow_rt_output_info(handle_.get(), index, &t);
    return {t.name ? t.name : "", std::vector<int64_t>(t.shape, t.shape + t.rank), t.element_count};
  }
  static std::vector<DeployedTensor> tensors(const std::vector<Info>& infos) {
    std::vector<DeployedTensor> out;
    for (const Info& i : infos) out.push_back({i.name, Shape(i.shape.begin(), i.shape.end())});
    return out;
  }
  std::unique_ptr<qflow_rt_model, RtModelDeleter> handle_;
  std::vector<Info> inputs_, outputs_;
};

}  // namespace

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
  return std::unique_ptr<DeployedModel>(new HbmModel(handle));
}

}  // namespace qflow
