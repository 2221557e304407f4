// Layer inputs: finding the layers, running the float model node by node, im2col grams.
#include "layer_inputs.h"

#include <algorithm>
#include <functional>
#include <map>

#include "qflow/interpreter.h"

namespace qflow::adaround {

namespace {

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// A float32 initializer read by `node` alone (rewriting it changes nothing else).
const Tensor* private_weight(const Graph& graph, const Node& node) {
  const Value* w = node.input(1);
  if (!w || w->uses().size() != 1) return nullptr;
  if (std::find(graph.inputs.begin(), graph.inputs.end(), w) != graph.inputs.end()) return nullptr;
  const Tensor* t = graph.initializer(w);
  return t && t->dtype() == DType::Float32 && t->numel() > 0 ? t : nullptr;
}

std::optional<Layer> as_layer(const Graph& graph, Node& node) {
  if (!is_default_domain(node) || !node.input(0)) return std::nullopt;
  const Tensor* w = private_weight(graph, node);
  if (!w) return std::nullopt;
  Layer layer;
  layer.node = &node;
  if (node.op_type() == "Conv") {
    const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
    if (w->rank() != 4 || (auto_pad != "NOTSET" && auto_pad != "VALID")) return std::nullopt;
    layer.groups = node.attr_int("group", 1);
    if (layer.groups < 1 || w->dim(0) % layer.groups != 0) return std::nullopt;
    layer.kernel = {w->dim(2), w->dim(3)};
    layer.strides = node.attr_ints("strides", {1, 1});
    layer.dilations = node.attr_ints("dilations", {1, 1});
    layer.pads = auto_pad == "VALID" ? std::vector<int64_t>{0, 0, 0, 0} : node.attr_ints("pads", {0, 0, 0, 0});
    if (layer.strides.size() != 2 || layer.dilations.size() != 2 || layer.pads.size() != 4) return std::nullopt;
    layer.channel_axis = 0;
    return layer;
  }
  if (node.op_type() == "Gemm") {
    if (w->rank() != 2 || node.attr_int("transA", 0) != 0) return std::nullopt;
    layer.channel_axis = node.attr_int("transB", 0) != 0 ? 0 : 1;
    return layer;
  }
  if (node.op_type() == "MatMul") {
    if (w->rank() != 2) return std::nullopt;
    layer.channel_axis = 1;
    return layer;
  }
  return std::nullopt;
}

// Vector length K of a layer's input (a Conv's patch per group).
int64_t input_length(const Graph& graph, const Layer& layer) {
  const Tensor& w = *graph.initializer(layer.node->input(1));
  if (layer.node->op_type() == "Conv") return w.dim(1) * w.dim(2) * w.dim(3);
  return layer.channel_axis == 0 ? w.dim(1) : w.dim(0);
}

// The input vectors of one run of the layer on `x`, per group as the columns of a [K, n]
// matrix (a Conv's im2col patches, every batch entry; a Gemm/MatMul's rows).
Expected<std::vector<Matrix>> input_vectors(const Graph& graph, const Layer& layer, const Tensor& x) {
  if (x.dtype() != DType::Float32) return invalid_input("input of '" + layer.node->name() + "' is not float32");
  const int64_t k = input_length(graph, layer);
  const float* data = x.data<float>();
  if (layer.node->op_type() != "Conv") {
    if (x.rank() < 1 || x.dim(x.rank() - 1) != k)
      return invalid_input("input of '" + layer.node->name() + "' has shape " + shape_to_string(x.shape()) +
                           ", expected a last dimension of " + std::to_string(k));
    const int64_t rows = x.numel() / k;
    const Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>> a(data, k, rows);
    return std::vector<Matrix>{a.cast<double>()};
  }
  if (x.rank() != 4) return invalid_input("input of Conv '" + layer.node->name() + "' is not 4-D");
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t kh = layer.kernel[0], kw = layer.kernel[1], cg = k / (kh * kw);
  if (cg * layer.groups != c)
    return invalid_input("input of Conv '" + layer.node->name() + "' has " + std::to_string(c) + " channels, expected " +
                         std::to_string(cg * layer.groups));
  const int64_t oh = (h + layer.pads[0] + layer.pads[2] - layer.dilations[0] * (kh - 1) - 1) / layer.strides[0] + 1;
  const int64_t ow = (wd + layer.pads[1] + layer.pads[3] - layer.dilations[1] * (kw - 1) - 1) / layer.strides[1] + 1;
  const int64_t per_image = std::max<int64_t>(oh, 0) * std::max<int64_t>(ow, 0);
  std::vector<Matrix> out(static_cast<std::size_t>(layer.groups), Matrix(k, n * per_image));
  if (per_image == 0) return out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < layer.groups; ++g) {
      Matrix& patches = out[static_cast<std::size_t>(g)];
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t row = (ci * kh + i) * kw + j;
            const float* plane = data + ((b * c) + g * cg + ci) * h * wd;
            for (int64_t y = 0; y < oh; ++y)
              for (int64_t xo = 0; xo < ow; ++xo) {
                const int64_t iy = y * layer.strides[0] - layer.pads[0] + i * layer.dilations[0];
                const int64_t ix = xo * layer.strides[1] - layer.pads[1] + j * layer.dilations[1];
                patches(row, b * per_image + y * ow + xo) =
                    (iy >= 0 && iy < h && ix >= 0 && ix < wd) ? plane[iy * wd + ix] : 0.0;
              }
          }
    }
  return out;
}

// Adds the products of one run of the layer: x~ x~^T to the grams and, when the layer reads
// rounded inputs, x~ x^T to the cross terms (`rounded` is x~, `original` x).
Status add_products(const Graph& graph, Layer& layer, const Tensor& rounded, const Tensor* original) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Matrix> xq, input_vectors(graph, layer, rounded));
  const int64_t k = input_length(graph, layer);
  if (layer.grams.empty()) layer.grams.assign(xq.size(), Matrix::Zero(k, k));
  for (std::size_t g = 0; g < xq.size(); ++g) layer.grams[g].noalias() += xq[g] * xq[g].transpose();
  if (original) {
    QFLOW_ASSIGN_OR_RETURN(std::vector<Matrix> xf, input_vectors(graph, layer, *original));
    if (layer.cross.empty()) layer.cross.assign(xq.size(), Matrix::Zero(k, k));
    for (std::size_t g = 0; g < xq.size(); ++g) {
      if (xf[g].cols() != xq[g].cols()) return internal_error("rounded and float inputs of '" + layer.node->name() + "' differ in shape");
      layer.cross[g].noalias() += xq[g] * xf[g].transpose();
    }
  }
  layer.vectors += xq.empty() ? 0 : xq.front().cols();
  return Status::ok();
}

void normalise(Layer& layer) {
  if (layer.vectors == 0) return;
  for (Matrix& gram : layer.grams) gram /= static_cast<double>(layer.vectors);
  for (Matrix& cross : layer.cross) cross /= static_cast<double>(layer.vectors);
}

using SampleValues = std::vector<std::map<const Value*, Tensor>>;

// Reads samples [0, count) as the graph's input values.
Expected<SampleValues> read_samples(const Graph& graph, const PassSamples& samples, int64_t count) {
  SampleValues out(static_cast<std::size_t>(count));
  for (int64_t index = 0; index < count; ++index) {
    QFLOW_ASSIGN_OR_RETURN(auto feeds, samples.sample(index));
    for (const Value* input : graph.runtime_inputs()) {
      auto it = feeds.find(input->name());
      if (it == feeds.end())
        return invalid_input("sample " + std::to_string(index) + " has no tensor for input '" + input->name() + "'");
      out[static_cast<std::size_t>(index)][input] = it->second;
    }
  }
  return out;
}

}  // namespace

Expected<std::vector<Layer>> find_layers(const Graph& graph) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  std::vector<Layer> layers;
  for (Node* node : order)
    if (std::optional<Layer> layer = as_layer(graph, *node)) layers.push_back(std::move(*layer));
  return layers;
}

Status collect_grams(const Model& model, const PassSamples& samples, int64_t count, std::vector<Layer>& layers) {
  const Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  std::map<const Node*, Layer*> layer_of;
  for (Layer& layer : layers) layer_of[layer.node] = &layer;
  // Uses left per value, so a value is dropped after its last reader.
  std::map<const Value*, int64_t> readers;
  for (const Node* node : order)
    for (const Value* v : node->inputs())
      if (v) ++readers[v];
  for (int64_t index = 0; index < count; ++index) {
    QFLOW_ASSIGN_OR_RETURN(auto feeds, samples.sample(index));
    std::map<const Value*, Tensor> values;
    for (const Value* input : graph.runtime_inputs()) {
      auto it = feeds.find(input->name());
      if (it == feeds.end()) return invalid_input("sample " + std::to_string(index) + " has no tensor for input '" + input->name() + "'");
      values[input] = it->second;
    }
    std::map<const Value*, int64_t> left = readers;
    for (const Node* node : order) {
      std::vector<const Tensor*> inputs;
      for (const Value* v : node->inputs()) {
        if (!v) {
          inputs.push_back(nullptr);
          continue;
        }
        if (const Tensor* t = graph.initializer(v)) {
          inputs.push_back(t);
          continue;
        }
        auto it = values.find(v);
        if (it == values.end()) return internal_error("value '" + v->name() + "' is read before it is computed");
        inputs.push_back(&it->second);
      }
      if (auto it = layer_of.find(node); it != layer_of.end())
        QFLOW_RETURN_IF_ERROR(add_products(graph, *it->second, *inputs[0], nullptr).with_context("sample " + std::to_string(index)));
      Expected<std::vector<Tensor>> outputs = evaluate_node(*node, inputs, model.opset(node->domain()));
      if (!outputs) return outputs.status().with_context(node->op_type() + " '" + node->name() + "'");
      for (std::size_t i = 0; i < node->outputs().size() && i < outputs->size(); ++i)
        if (const Value* out = node->output(i)) values[out] = std::move((*outputs)[i]);
      for (const Value* v : node->inputs())
        if (v && --left[v] == 0) values.erase(v);
    }
  }
  for (Layer& layer : layers) normalise(layer);
  return Status::ok();
}

Status round_in_sequence(Model& model, const PassSamples& samples, int64_t count, std::vector<Layer>& layers,
                         const std::function<Status(Layer&)>& round) {
  Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  std::map<const Node*, Layer*> layer_of;
  // The float weights, kept for the float run once `round` has replaced them in the graph.
  std::map<const Node*, Tensor> float_weight;
  for (Layer& layer : layers) {
    layer_of[layer.node] = &layer;
    float_weight.emplace(layer.node, *graph.initializer(layer.node->input(1)));
  }
  std::map<const Value*, int64_t> readers;
  for (const Node* node : order)
    for (const Value* v : node->inputs())
      if (v) ++readers[v];
  // Per sample: the float model's values, and the rounded model's where they differ (a value
  // upstream of every rounded layer is the same in both and kept once).
  QFLOW_ASSIGN_OR_RETURN(SampleValues floats, read_samples(graph, samples, count));
  SampleValues rounded(floats.size());
  std::map<const Value*, int64_t> left = readers;
  const auto gather = [&](const Node& node, std::size_t sample, bool rounded_model,
                          std::vector<const Tensor*>& inputs) -> Status {
    inputs.clear();
    for (std::size_t i = 0; i < node.inputs().size(); ++i) {
      const Value* v = node.input(i);
      if (!v) {
        inputs.push_back(nullptr);
        continue;
      }
      if (i == 1 && !rounded_model)
        if (auto w = float_weight.find(&node); w != float_weight.end()) {
          inputs.push_back(&w->second);
          continue;
        }
      if (const Tensor* t = graph.initializer(v)) {
        inputs.push_back(t);
        continue;
      }
      if (rounded_model)
        if (auto it = rounded[sample].find(v); it != rounded[sample].end()) {
          inputs.push_back(&it->second);
          continue;
        }
      auto it = floats[sample].find(v);
      if (it == floats[sample].end()) return internal_error("value '" + v->name() + "' is read before it is computed");
      inputs.push_back(&it->second);
    }
    return Status::ok();
  };
  std::vector<const Tensor*> inputs;
  for (const Node* node : order) {
    auto layer = layer_of.find(node);
    if (layer != layer_of.end()) {
      for (std::size_t s = 0; s < floats.size(); ++s) {
        const Value* x = node->input(0);
        const Tensor& original = floats[s].at(x);
        auto it = rounded[s].find(x);
        const Status added = it == rounded[s].end() ? add_products(graph, *layer->second, original, &original)
                                                    : add_products(graph, *layer->second, it->second, &original);
        QFLOW_RETURN_IF_ERROR(added.with_context("sample " + std::to_string(s)));
      }
      normalise(*layer->second);
      QFLOW_RETURN_IF_ERROR(round(*layer->second));
    }
    for (std::size_t s = 0; s < floats.size(); ++s) {
      // The rounded model's output differs from the float one when the node is a rounded
      // layer or reads a value that differs.
      bool differs = layer != layer_of.end();
      for (const Value* v : node->inputs()) differs = differs || (v && rounded[s].count(v) > 0);
      QFLOW_RETURN_IF_ERROR(gather(*node, s, false, inputs));
      Expected<std::vector<Tensor>> outputs = evaluate_node(*node, inputs, model.opset(node->domain()));
      if (!outputs) return outputs.status().with_context(node->op_type() + " '" + node->name() + "'");
      for (std::size_t i = 0; i < node->outputs().size() && i < outputs->size(); ++i)
        if (const Value* out = node->output(i)) floats[s][out] = std::move((*outputs)[i]);
      if (differs) {
        QFLOW_RETURN_IF_ERROR(gather(*node, s, true, inputs));
        Expected<std::vector<Tensor>> moved = evaluate_node(*node, inputs, model.opset(node->domain()));
        if (!moved) return moved.status().with_context(node->op_type() + " '" + node->name() + "'");
        for (std::size_t i = 0; i < node->outputs().size() && i < moved->size(); ++i)
          if (const Value* out = node->output(i)) rounded[s][out] = std::move((*moved)[i]);
      }
    }
    for (const Value* v : node->inputs())
      if (v && --left[v] == 0)
        for (std::size_t s = 0; s < floats.size(); ++s) {
          floats[s].erase(v);
          rounded[s].erase(v);
        }
  }
  return Status::ok();
}

Matrix weight_matrix(const Graph& graph, const Layer& layer) {
  const Tensor& w = *graph.initializer(layer.node->input(1));
  const int64_t rows = w.dim(layer.channel_axis), cols = w.numel() / rows;
  const Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
      w.data<float>(), layer.channel_axis == 0 ? rows : cols, layer.channel_axis == 0 ? cols : rows);
  return layer.channel_axis == 0 ? Matrix(m.cast<double>()) : Matrix(m.cast<double>().transpose());
}

Tensor weight_tensor(const Graph& graph, const Layer& layer, const Matrix& weight) {
  const Tensor& w = *graph.initializer(layer.node->input(1));
  Tensor out(DType::Float32, w.shape());
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
      out.data<float>(), layer.channel_axis == 0 ? weight.rows() : weight.cols(),
      layer.channel_axis == 0 ? weight.cols() : weight.rows());
  if (layer.channel_axis == 0) m = weight.cast<float>();
  else m = weight.transpose().cast<float>();
  return out;
}

}  // namespace qflow::adaround
