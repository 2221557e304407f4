// Input types: the options parsed per input, the input_convert ops that replace an input's
// quantize ops, and the host-side float conversions verify compares against.
#include "input_type.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

#include "qflow/runtime/executor.h"
#include "qflow/runtime/fixed_point.h"

namespace qflow {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// "v" for every input, or "a:v1;b:v2": the value of each named input ("" when not named).
Expected<std::map<std::string, std::string>> per_input(const std::string& option, const std::string& text,
                                                       const std::vector<std::pair<std::string, Shape>>& inputs) {
  std::map<std::string, std::string> values;
  if (text.find(':') == std::string::npos) {
    for (const auto& [name, shape] : inputs) values[name] = trim(text);
    return values;
  }
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ';')) {
    if (trim(part).empty()) continue;
    const auto colon = part.rfind(':');
    if (colon == std::string::npos)
      return invalid_input(option + " = \"" + text + "\": '" + trim(part) + "' is not name:value");
    const std::string name = trim(part.substr(0, colon));
    if (std::none_of(inputs.begin(), inputs.end(), [&](const auto& in) { return in.first == name; })) {
      std::string names;
      for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.first;
      return invalid_input(option + ": the model has no input '" + name + "' (inputs: " + names + ")");
    }
    values[name] = trim(part.substr(colon + 1));
  }
  return values;
}

// "1 2 3", "1,2,3": numbers for `channels` channels (one value is repeated).
Expected<std::vector<double>> numbers(const std::string& option, const std::string& input, const std::string& text,
                                      int64_t channels, double fallback) {
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::stringstream in(spaced);
  std::vector<double> out;
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    const double v = std::strtod(word.c_str(), &end);
    if (end == word.c_str() || *end != '\0' || !std::isfinite(v))
      return invalid_input(option + " of input '" + input + "': '" + word + "' is not a number");
    out.push_back(v);
  }
  if (out.empty()) out.push_back(fallback);
  if (out.size() == 1) out.assign(static_cast<std::size_t>(channels), out[0]);
  if (static_cast<int64_t>(out.size()) != channels)
    return invalid_input(option + " of input '" + input + "': " + std::to_string(out.size()) +
                         " values for " + std::to_string(channels) + " channels (give 1 or " + std::to_string(channels) + ")");
  return out;
}

int64_t channels_of(const std::string& type) { return type == "gray" ? 1 : 3; }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string numbers_text(const std::vector<double>& v, const char* separator) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? separator : "") + number_text(v[i]);
  return s;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

}  // namespace

InputTypeOptions InputTypeOptions::from(const Options& options) {
  InputTypeOptions o;
  const auto get = [&](const char* name) { return options.has(name) ? options.get_string(name) : std::string(); };
  o.type_rt = get("input-type-rt");
  o.layout_rt = get("input-layout-rt");
  o.type_train = get("input-type-train");
  o.mean = get("mean-value");
  o.scale = get("scale-value");
  return o;
}

std::string InputType::conversion() const {
  std::string s;
  if (yuv_to_rgb) s = "YUV -> RGB (BT.601 full range, Q16 integers), ";
  static const char* kNames[3][3] = {{"Y", "U", "V"}, {"R", "G", "B"}, {"B", "G", "R"}};
  const int names = yuv_to_rgb ? 1 : (type_rt == "rgb" ? 1 : type_rt == "bgr" ? 2 : 0);
  std::string order;
  for (const int32_t c : channels) order += (order.empty() ? "" : ",") + std::string(type_rt == "gray" ? "gray" : kNames[names][c]);
  return s + "channels " + order;
}

Expected<std::vector<InputType>> resolve_input_types(const InputTypeOptions& options,
                                                     const std::vector<std::pair<std::string, Shape>>& inputs) {
  std::vector<InputType> out;
  if (!options.any() && options.type_rt.find(':') == std::string::npos) return out;
  QFLOW_ASSIGN_OR_RETURN(auto rt, per_input("input-type-rt", options.type_rt, inputs));
  QFLOW_ASSIGN_OR_RETURN(auto layout, per_input("input-layout-rt", options.layout_rt, inputs));
  QFLOW_ASSIGN_OR_RETURN(auto train, per_input("input-type-train", options.type_train, inputs));
  QFLOW_ASSIGN_OR_RETURN(auto mean, per_input("mean-value", options.mean, inputs));
  QFLOW_ASSIGN_OR_RETURN(auto scale, per_input("scale-value", options.scale, inputs));
  for (const auto& [name, shape] : inputs) {
    InputType t;
    t.input = name;
    t.type_rt = rt[name];
    if (t.type_rt.empty() || t.type_rt == "featuremap") continue;
    if (t.type_rt != "gray" && t.type_rt != "rgb" && t.type_rt != "bgr" && t.type_rt != "yuv444" && t.type_rt != "nv12")
      return invalid_input("input-type-rt of input '" + name + "': '" + t.type_rt +
                           "' is not one of featuremap, gray, rgb, bgr, yuv444, nv12");
    t.layout_rt = layout[name].empty() ? "nhwc" : layout[name];
    if (t.layout_rt != "nhwc" && t.layout_rt != "nchw")
      return invalid_input("input-layout-rt of input '" + name + "': '" + t.layout_rt + "' is not nhwc or nchw");
    t.type_train = train[name];
    if (t.type_train.empty()) t.type_train = (t.type_rt == "yuv444" || t.type_rt == "nv12") ? "rgb" : t.type_rt;
    if (t.type_train != "gray" && t.type_train != "rgb" && t.type_train != "bgr" && t.type_train != "yuv444")
      return invalid_input("input-type-train of input '" + name + "': '" + t.type_train +
                           "' is not one of gray, rgb, bgr, yuv444");
    const std::string& r = t.type_rt;
    const std::string& tr = t.type_train;
    const bool yuv = r == "yuv444" || r == "nv12";
    if (tr == "gray") {
      if (r == "rgb" || r == "bgr")
        return invalid_input("input '" + name + "': input-type-rt " + r + " with input-type-train gray is not supported");
      t.channels = {0};  // gray, or the luma plane
    } else if (tr == "yuv444") {
      if (!yuv) return invalid_input("input '" + name + "': input-type-train yuv444 needs input-type-rt yuv444 or nv12");
      t.channels = {0, 1, 2};
    } else if (r == "gray") {
      t.channels = {0, 0, 0};  // gray replicated into a colour model
    } else {
      t.yuv_to_rgb = yuv;
      const bool frame_rgb = yuv || r == "rgb";  // converted channels in R, G, B order
      t.channels = (tr == "rgb") == frame_rgb ? std::vector<int32_t>{0, 1, 2} : std::vector<int32_t>{2, 1, 0};
    }
    if (shape.size() != 4)
      return invalid_input("input-type-rt " + r + ": input '" + name + "' has shape " + shape_text(shape) +
                           ", expected a static [N, C, H, W]");
    const int64_t c = channels_of(tr);
    if (shape[1] != c)
      return invalid_input("input '" + name + "': input-type-train " + tr + " has " + std::to_string(c) +
                           " channels, the model input has shape " + shape_text(shape));
    if (r == "nv12" && (shape[2] % 2 != 0 || shape[3] % 2 != 0))
      return invalid_input("input '" + name + "': nv12 needs an even height and width, the model input has shape " +
                           shape_text(shape));
    t.train_shape = shape;
    const int64_t rc = channels_of(r);
    if (r == "nv12") t.rt_shape = {shape[0], shape[2] * 3 / 2, shape[3]};
    else if (t.layout_rt == "nhwc") t.rt_shape = {shape[0], shape[2], shape[3], rc};
    else t.rt_shape = {shape[0], rc, shape[2], shape[3]};
    QFLOW_ASSIGN_OR_RETURN(t.mean, numbers("mean-value", name, mean[name], c, 0.0));
    QFLOW_ASSIGN_OR_RETURN(t.scale, numbers("scale-value", name, scale[name], c, 1.0));
    out.push_back(std::move(t));
  }
  return out;
}

Expected<std::vector<InputType>> resolve_input_types_of_frames(const InputTypeOptions& options,
                                                               const std::vector<std::pair<std::string, Shape>>& frames) {
  if (!options.any()) return std::vector<InputType>{};
  QFLOW_ASSIGN_OR_RETURN(auto rt, per_input("input-type-rt", options.type_rt, frames));
  QFLOW_ASSIGN_OR_RETURN(auto layout, per_input("input-layout-rt", options.layout_rt, frames));
  QFLOW_ASSIGN_OR_RETURN(auto train, per_input("input-type-train", options.type_train, frames));
  std::vector<std::pair<std::string, Shape>> inputs;
  for (const auto& [name, s] : frames) {
    const std::string& r = rt[name];
    std::string tr = train[name];
    if (tr.empty()) tr = (r == "yuv444" || r == "nv12") ? "rgb" : r;
    const int64_t c = channels_of(tr);
    Shape shape = s;
    if (r == "nv12" && s.size() == 3) shape = {s[0], c, s[1] * 2 / 3, s[2]};
    else if (r != "nv12" && s.size() == 4 && layout[name] != "nchw") shape = {s[0], c, s[1], s[2]};
    else if (r != "nv12" && s.size() == 4) shape = {s[0], c, s[2], s[3]};
    inputs.emplace_back(name, shape);
  }
  QFLOW_ASSIGN_OR_RETURN(std::vector<InputType> types, resolve_input_types(options, inputs));
  for (const InputType& t : types)
    for (const auto& [name, s] : frames)
      if (name == t.input && s != t.rt_shape)
        return invalid_input("input '" + name + "' takes frames of shape " + shape_text(s) + ", not the " + t.type_rt +
                             " frames the options describe (" + shape_text(t.rt_shape) + ")");
  return types;
}

namespace {

int32_t read_i32(const std::vector<uint8_t>& data, std::size_t i) {
  uint32_t u = 0;
  for (int b = 0; b < 4; ++b) u |= static_cast<uint32_t>(data[4 * i + static_cast<std::size_t>(b)]) << (8 * b);
  return static_cast<int32_t>(u);
}

// The exact fold (apply_input_types): the convs reading the input's quantize read the frame
// itself. False, with the model untouched, where it does not apply or the result would not run.
bool fold_into_convs(lowered::Model& model, int32_t input, const InputType& type) {
  if (type.yuv_to_rgb || (type.type_rt != "gray" && type.type_rt != "rgb" && type.type_rt != "bgr")) return false;
  if (type.rt_shape != type.train_shape) return false;  // NCHW (or [N, 1, H, W] gray)
  for (std::size_t c = 0; c < type.channels.size(); ++c)
    if (type.channels[c] != static_cast<int32_t>(c)) return false;
  const double mean = type.mean[0], scale = type.scale[0];
  for (std::size_t c = 0; c < type.mean.size(); ++c)
    if (type.mean[c] != mean || type.scale[c] != scale) return false;
  if (mean != std::floor(mean) || mean < 0 || mean > 255 || !(scale > 0)) return false;
  // One quantize reads the input; only conv2d ops (as x) read its output.
  lowered::Op* quantize = nullptr;
  std::vector<lowered::Op*> convs;
  for (lowered::Segment& seg : model.segments)
    for (lowered::Op& op : seg.ops)
      if (std::find(op.inputs.begin(), op.inputs.end(), input) != op.inputs.end()) {
        if (op.type != "quantize" || quantize) return false;
        quantize = &op;
      }
  if (!quantize) return false;
  const int32_t xq = quantize->outputs[0];
  if (std::find(model.outputs.begin(), model.outputs.end(), xq) != model.outputs.end()) return false;
  for (lowered::Segment& seg : model.segments)
    for (lowered::Op& op : seg.ops)
      for (std::size_t k = 0; k < op.inputs.size(); ++k)
        if (op.inputs[k] == xq) {
          if (op.type != "conv2d" || k != 0) return false;
          convs.push_back(&op);
        }
  if (convs.empty()) return false;
  const double ratio = scale / model.tensors[static_cast<std::size_t>(xq)].quant.scale;  // s_new / s_old
  lowered::Model folded = model;
  const auto index_in = [&](lowered::Op* op) -> lowered::Op& {
    for (std::size_t s = 0; s < model.segments.size(); ++s)
      for (std::size_t o = 0; o < model.segments[s].ops.size(); ++o)
        if (&model.segments[s].ops[o] == op) return folded.segments[s].ops[o];
    throw std::logic_error("op not found");
  };
  for (lowered::Op* conv : convs) {
    lowered::Op& op = index_in(conv);
    op.inputs[0] = input;
    lowered::Attribute* mantissa = nullptr;
    lowered::Attribute* shift = nullptr;
    for (lowered::Attribute& a : op.attributes) {
      if (a.name == "multiplier_mantissa") mantissa = &a;
      if (a.name == "multiplier_shift") shift = &a;
    }
    if (!mantissa || !shift || mantissa->ints.size() != shift->ints.size()) return false;
    for (std::size_t i = 0; i < mantissa->ints.size(); ++i) {
      const double real = fx::multiplier_value({static_cast<int32_t>(mantissa->ints[i]), static_cast<int>(shift->ints[i])}) * ratio;
      fx::Multiplier m;
      if (!fx::make_multiplier(real, m).is_ok()) return false;
      mantissa->ints[i] = m.mantissa;
      shift->ints[i] = m.shift;
    }
    if (op.inputs.size() > 2 && op.inputs[2] >= 0) {  // the bias, at scale s_x * s_w: rescaled
      lowered::Tensor bias = folded.tensors[static_cast<std::size_t>(op.inputs[2])];
      if (bias.type != lowered::ElemType::i32 || !bias.constant) return false;
      std::vector<uint8_t> data;
      for (std::size_t i = 0; i < bias.data.size() / 4; ++i) {
        const double v = std::nearbyint(static_cast<double>(read_i32(bias.data, i)) / ratio);
        if (!(std::fabs(v) < 2147483647.0)) return false;
        const auto u = static_cast<uint32_t>(static_cast<int32_t>(v));
        for (int b = 0; b < 4; ++b) data.push_back(static_cast<uint8_t>(u >> (8 * b)));
      }
      bias.name += "_frame";
      bias.data = std::move(data);
      folded.tensors.push_back(std::move(bias));
      op.inputs[2] = static_cast<int32_t>(folded.tensors.size() - 1);
    }
  }
  // The quantize goes; the frame is the quantized normalized tensor.
  for (lowered::Segment& seg : folded.segments)
    seg.ops.erase(std::remove_if(seg.ops.begin(), seg.ops.end(),
                                 [&](const lowered::Op& op) { return op.type == "quantize" && op.inputs[0] == input; }),
                  seg.ops.end());
  lowered::Tensor& frame = folded.tensors[static_cast<std::size_t>(input)];
  frame.type = lowered::ElemType::u8;
  frame.shape = type.rt_shape;
  frame.quant = {scale, static_cast<int32_t>(mean)};
  // A fold the kernels would refuse (the accumulator bound with the new zero point) is not made.
  auto executor = lowered::Executor::create(folded, lowered::Kernels::reference);
  if (!executor) return false;
  std::vector<float> zeros(static_cast<std::size_t>(type.rt_shape[0] * type.rt_shape[1] * type.rt_shape[2] * type.rt_shape[3]), 0.0f);
  std::vector<std::span<const float>> feeds;
  for (const int32_t i : folded.inputs) {
    if (i != input) return false;  // other inputs need their own values: keep it simple
    feeds.emplace_back(zeros);
  }
  std::vector<std::vector<float>> outputs;
  if (!executor->run(feeds, outputs).is_ok()) return false;
  model = std::move(folded);
  return true;
}

}  // namespace

Status apply_input_types(lowered::Model& model, std::vector<InputType>& types, bool power_of_two) {
  for (InputType& type : types) {
    int32_t input = -1;
    for (const int32_t i : model.inputs)
      if (model.tensors[static_cast<std::size_t>(i)].name == type.input) input = i;
    if (input < 0) return invalid_input("input-type-rt: the lowered model has no input '" + type.input + "'");
    const std::string where = "input-type-rt " + type.type_rt + " of input '" + type.input + "': ";
    if (model.tensors[static_cast<std::size_t>(input)].shape != type.train_shape)
      return invalid_input(where + "the lowered input has another shape than the model's");
    if (std::find(model.outputs.begin(), model.outputs.end(), input) != model.outputs.end())
      return invalid_input(where + "the input is also a model output");
    if (!power_of_two && fold_into_convs(model, input, type)) {
      type.folded = "into the first layer (conv2d reads the frame as scale " + number_text(type.scale[0]) +
                    ", zero point " + number_text(type.mean[0]) + "; multipliers and biases rescaled)";
      continue;
    }
    type.folded = "into input_convert's table (256 entries per channel: normalization and quantization, exact)";
    bool read = false;
    for (lowered::Segment& seg : model.segments)
      for (lowered::Op& op : seg.ops) {
        if (std::find(op.inputs.begin(), op.inputs.end(), input) == op.inputs.end()) continue;
        if (op.type != "quantize")
          return invalid_input(where + "it is read by " + op.type + " '" + op.name +
                               "' (on the CPU); a uint8 input needs every reader on the BPU");
        const lowered::Tensor y = model.tensors[static_cast<std::size_t>(op.outputs[0])];
        if (y.type != lowered::ElemType::i8 && y.type != lowered::ElemType::u8)
          return invalid_input(where + "its first layer reads it as a 16-bit tensor; uint8 inputs need an 8-bit one");
        fx::QParams q{y.quant.scale, y.quant.zero_point, y.type == lowered::ElemType::i8 ? fx::QType::Int8 : fx::QType::UInt8};
        // The normalization and the quantize as one table per channel: exact, whatever the
        // padding of the layers after it (they see the quantized normalized value as before).
        lowered::Tensor table;
        table.name = y.name + "_input_table";
        table.type = lowered::ElemType::i32;
        table.shape = {static_cast<int64_t>(type.channels.size()), 256};
        table.constant = true;
        for (std::size_t c = 0; c < type.channels.size(); ++c)
          for (int v = 0; v < 256; ++v) {
            const int32_t value = fx::quantize((static_cast<double>(v) - type.mean[c]) * type.scale[c], q);
            for (int b = 0; b < 4; ++b) table.data.push_back(static_cast<uint8_t>(static_cast<uint32_t>(value) >> (8 * b)));
          }
        model.tensors.push_back(std::move(table));
        op.type = "input_convert";
        op.inputs = {input, static_cast<int32_t>(model.tensors.size() - 1)};
        std::vector<int64_t> channels(type.channels.begin(), type.channels.end());
        op.attributes = {{"channels", channels, {}, {}},
                         {"format", {}, {}, {type.type_rt}},
                         {"layout", {}, {}, {type.type_rt == "nv12" ? "nhwc" : type.layout_rt}},
                         {"yuv_to_rgb", {type.yuv_to_rgb ? 1 : 0}, {}, {}}};
        read = true;
      }
    if (!read) return invalid_input(where + "nothing reads the input");
    lowered::Tensor& frame = model.tensors[static_cast<std::size_t>(input)];
    frame.type = lowered::ElemType::u8;
    frame.shape = type.rt_shape;
    frame.quant = {1.0, 0};
  }
  return Status::ok();
}

std::string input_types_text(const std::vector<InputType>& types) {
  if (types.empty()) return "";
  std::string out = "inputs:\n";
  for (const InputType& t : types) {
    out += "  " + t.input + ": " + t.type_rt + (t.type_rt == "nv12" ? "" : " " + t.layout_rt) + " uint8 " +
           shape_text(t.rt_shape) + " -> " + t.type_train + " float " + shape_text(t.train_shape) + "\n";
    out += "    conversion:    " + t.conversion() + "\n";
    out += "    normalization: (x - mean) * scale, mean " + numbers_text(t.mean, " ") + ", scale " +
           numbers_text(t.scale, " ") + "\n";
    out += "    folded:        " + (t.folded.empty() ? std::string("decided by the lowering") : t.folded) + "\n";
  }
  return out + "\n";
}

std::string input_types_json(const std::vector<InputType>& types) {
  if (types.empty()) return "";
  std::string out = "[";
  for (std::size_t i = 0; i < types.size(); ++i) {
    const InputType& t = types[i];
    out += std::string(i ? ",\n    " : "\n    ") + "{\"name\": " + json_string(t.input) +
           ", \"type_rt\": " + json_string(t.type_rt) + ", \"layout_rt\": " + json_string(t.type_rt == "nv12" ? "nv12" : t.layout_rt) +
           ", \"shape_rt\": " + shape_text(t.rt_shape) + ", \"type_train\": " + json_string(t.type_train) +
           ", \"shape_train\": " + shape_text(t.train_shape) + ", \"conversion\": " + json_string(t.conversion()) +
           ", \"mean\": [" + numbers_text(t.mean, ", ") + "], \"scale\": [" + numbers_text(t.scale, ", ") +
           "], \"folded\": " + json_string(t.folded.empty() ? "decided by the lowering" : t.folded) + "}";
  }
  return out + "\n  ]";
}

std::vector<float> frame_to_train(const InputType& type, const std::vector<float>& frame) {
  const int64_t n = type.train_shape[0], h = type.train_shape[2], w = type.train_shape[3];
  const auto c_out = static_cast<int64_t>(type.channels.size());
  const int64_t rc = channels_of(type.type_rt), plane = h * w;
  const int64_t frame_size = type.type_rt == "nv12" ? plane * 3 / 2 : plane * rc;
  std::vector<float> out(static_cast<std::size_t>(n * c_out * plane));
  for (int64_t b = 0; b < n; ++b) {
    const float* f = frame.data() + b * frame_size;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double p[3] = {0, 0, 0};
        if (type.type_rt == "nv12") {
          const float* uv = f + plane + (y / 2) * w + (x / 2) * 2;
          p[0] = f[y * w + x];
          p[1] = uv[0];
          p[2] = uv[1];
        } else {
          for (int64_t c = 0; c < rc; ++c)
            p[c] = type.layout_rt == "nhwc" ? f[(y * w + x) * rc + c] : f[c * plane + y * w + x];
        }
        if (type.yuv_to_rgb) {
          const double Y = p[0], U = p[1] - 128.0, V = p[2] - 128.0;
          p[0] = std::clamp(Y + 1.402 * V, 0.0, 255.0);
          p[1] = std::clamp(Y - 0.344136 * U - 0.714136 * V, 0.0, 255.0);
          p[2] = std::clamp(Y + 1.772 * U, 0.0, 255.0);
        }
        for (int64_t c = 0; c < c_out; ++c)
          out[static_cast<std::size_t>((b * c_out + c) * plane + y * w + x)] = static_cast<float>(
              (p[type.channels[static_cast<std::size_t>(c)]] - type.mean[static_cast<std::size_t>(c)]) *
              type.scale[static_cast<std::size_t>(c)]);
      }
  }
  return out;
}

std::vector<float> train_to_frame(const InputType& type, const std::vector<float>& sample) {
  const int64_t n = type.train_shape[0], h = type.train_shape[2], w = type.train_shape[3];
  const auto c_in = static_cast<int64_t>(type.channels.size());
  const int64_t rc = channels_of(type.type_rt), plane = h * w;
  const int64_t frame_size = type.type_rt == "nv12" ? plane * 3 / 2 : plane * rc;
  std::vector<float> frame(static_cast<std::size_t>(n * frame_size), 0.0f);
  const auto u8 = [](double v) { return static_cast<float>(std::clamp(std::nearbyint(v), 0.0, 255.0)); };
  std::vector<double> u_plane(static_cast<std::size_t>(plane)), v_plane(static_cast<std::size_t>(plane));
  for (int64_t b = 0; b < n; ++b) {
    float* f = frame.data() + b * frame_size;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double p[3] = {0.0, 128.0, 128.0};
        double train[3] = {0.0, 0.0, 0.0};
        for (int64_t c = 0; c < c_in; ++c) {
          const auto cc = static_cast<std::size_t>(c);
          const double scale = type.scale[cc] != 0.0 ? type.scale[cc] : 1.0;
          train[c] = u8(sample[static_cast<std::size_t>((b * c_in + c) * plane + y * w + x)] / scale + type.mean[cc]);
        }
        if (type.yuv_to_rgb) {
          double rgb[3] = {0, 0, 0};
          for (int64_t c = 0; c < c_in; ++c) rgb[type.channels[static_cast<std::size_t>(c)]] = train[c];
          p[0] = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
          p[1] = -0.168736 * rgb[0] - 0.331264 * rgb[1] + 0.5 * rgb[2] + 128.0;
          p[2] = 0.5 * rgb[0] - 0.418688 * rgb[1] - 0.081312 * rgb[2] + 128.0;
        } else {
          for (int64_t c = c_in; c-- > 0;) p[type.channels[static_cast<std::size_t>(c)]] = train[c];
        }
        if (type.type_rt == "nv12") {
          f[y * w + x] = u8(p[0]);
          u_plane[static_cast<std::size_t>(y * w + x)] = p[1];
          v_plane[static_cast<std::size_t>(y * w + x)] = p[2];
        } else {
          for (int64_t c = 0; c < rc; ++c)
            (type.layout_rt == "nhwc" ? f[(y * w + x) * rc + c] : f[c * plane + y * w + x]) = u8(p[c]);
        }
      }
    if (type.type_rt == "nv12")
      for (int64_t y = 0; y < h; y += 2)
        for (int64_t x = 0; x < w; x += 2) {
          double u = 0, v = 0;
          for (int64_t dy = 0; dy < 2; ++dy)
            for (int64_t dx = 0; dx < 2; ++dx) {
              u += u_plane[static_cast<std::size_t>((y + dy) * w + x + dx)];
              v += v_plane[static_cast<std::size_t>((y + dy) * w + x + dx)];
            }
          float* uv = f + plane + (y / 2) * w + x;
          uv[0] = u8(u / 4);
          uv[1] = u8(v / 4);
        }
  }
  return frame;
}

}  // namespace qflow
