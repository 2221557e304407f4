// Input types compiled into the model (hb_mapper's input_type_rt): a uint8 frame (gray, rgb,
// bgr, yuv444, nv12) that an input_convert op turns into the quantized tensor the first layer
// reads, with the float model's colour order and normalization (x - mean) * scale inside.
// docs/input-types.md is the user's page.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"
#include "qflow/plugin/options.h"
#include "qflow/runtime/lowered_model.h"

namespace qflow {

// The five target options as given: each one value for every input, or per input
// "name:value;name:value" (docs/input-types.md).
struct InputTypeOptions {
  std::string type_rt, layout_rt, type_train, mean, scale;

  static InputTypeOptions from(const Options& options);
  bool any() const { return !type_rt.empty() && type_rt != "featuremap"; }
};

// One model input with a uint8 type, resolved against its float shape [N, C, H, W].
struct InputType {
  std::string input;
  std::string type_rt;     // gray, rgb, bgr, yuv444, nv12
  std::string layout_rt;   // nhwc, nchw (nv12: its own layout)
  std::string type_train;  // gray, rgb, bgr, yuv444
  std::vector<int64_t> train_shape;  // [N, C, H, W], the float model's
  std::vector<int64_t> rt_shape;     // the frame's
  std::vector<double> mean, scale;   // one per train channel
  bool yuv_to_rgb = false;
  std::vector<int32_t> channels;  // train channel c reads converted channel channels[c]
  // Where apply_input_types put the normalization: "" before it ran.
  std::string folded;

  // "BT.601 full range YUV -> RGB, then channels R, G, B" and the like.
  std::string conversion() const;
};

// The inputs the options give a uint8 type (empty when all are featuremap). `inputs` are the
// model's (name, float shape) pairs; errors name the option, the input and what is wrong.
Expected<std::vector<InputType>> resolve_input_types(const InputTypeOptions& options,
                                                     const std::vector<std::pair<std::string, Shape>>& inputs);

// The same for a compiled file, from its inputs' (name, frame shape) pairs: inputs whose
// frames are not u8 [..] of the options' rt type are left out.
Expected<std::vector<InputType>> resolve_input_types_of_frames(const InputTypeOptions& options,
                                                               const std::vector<std::pair<std::string, Shape>>& frames);

// Replaces the quantize ops that read each such input by input_convert ops reading a u8
// frame; the model input becomes that frame. Every reader of the input must be such a
// quantize op producing an 8-bit tensor (an error otherwise).
//
// Where exact, no op is added: a gray / rgb / bgr frame in NCHW without reordering, with one
// integer mean and one scale for every channel, read only by conv2d ops, is that tensor
// quantized with scale `scale` and zero point `mean`; the convs read it directly (their
// zero padding is the zero point, the normalized 0) with multipliers and biases rescaled from
// the calibrated input scale. Not on power-of-two platforms. Each type's `folded` says
// which was done.
Status apply_input_types(lowered::Model& model, std::vector<InputType>& types, bool power_of_two = false);

// The check report's section (text lines and a JSON array), "" when `types` is empty.
std::string input_types_text(const std::vector<InputType>& types);
std::string input_types_json(const std::vector<InputType>& types);

// Host-side float reference of the frame: the train-format float tensor [N, C, H, W] the float
// model sees for `frame` (colour converted in double, then (x - mean) * scale).
std::vector<float> frame_to_train(const InputType& type, const std::vector<float>& frame);
// The frame a train-format float sample stands for: the normalization inverted, rounded and
// clamped to [0, 255], the colour order converted to the rt type (RGB -> YUV BT.601 full
// range, NV12 chroma as the mean of each 2x2 block). How verify gets frames from the
// calibration samples.
std::vector<float> train_to_frame(const InputType& type, const std::vector<float>& sample);

}  // namespace qflow
