// Lowering of MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool and Resize.
#include "lowering_context.h"

namespace qflow::lowering {

namespace {

std::vector<int64_t> pads_of(const Node& node) {
  if (node.attr_string("auto_pad", "NOTSET") == "VALID") return {0, 0, 0, 0};
  return node.attr_ints("pads", {0, 0, 0, 0});
}

std::string pool_gap(const Lowerer& l, const Node& node) {
  const std::string& op = node.op_type();
  const Shape x = l.shape(node.input(0));
  if (x.size() != 4) return no_lowering(node, "with input rank " + std::to_string(x.size()) + " (2-D pooling only)");
  if (!l.quant(node.input(0))) return no_lowering(node, "with an input that is not quantized");
  if (node.output(1) && !node.output(1)->uses().empty()) return no_lowering(node, "with its Indices output in use");
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return {};
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return no_lowering(node, "with auto_pad " + auto_pad);
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != 2) return no_lowering(node, "without a 2-D kernel_shape");
  if (node.attr_int("storage_order", 0) != 0) return no_lowering(node, "with storage_order 1");
  const std::vector<int64_t> strides = node.attr_ints("strides", {1, 1});
  const std::vector<int64_t> pads = pads_of(node);
  const std::vector<int64_t> dilations = node.attr_ints("dilations", {1, 1});
  if (op == "AveragePool" && (dilations[0] != 1 || dilations[1] != 1)) return no_lowering(node, "with dilations");
  const Shape y = l.shape(node.output(0));
  for (int axis = 0; axis < 2; ++axis) {
    const int64_t window = (kernel[axis] - 1) * dilations[axis] + 1;
    const int64_t expect = (x[2 + axis] + pads[axis] + pads[2 + axis] - window) / strides[axis] + 1;
    if (y.size() != 4 || y[2 + axis] != expect)
      return no_lowering(node, "whose output " + shape_to_string(y) + " needs ceil_mode (floor gives " + std::to_string(expect) + ")");
  }
  return {};
}

Status lower_pool2d(Lowerer& l, const Node& node) {
  const std::string& op = node.op_type();
  QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
  if (op == "GlobalAveragePool") {
    const int32_t y = l.write_quantized(node.output(0));
    l.emit(make_op("global_average_pool", node, {x}, {y}));
    return Status::ok();
  }
  if (op == "AveragePool") {
    const int32_t y = l.write_quantized(node.output(0));
    lowered::Op lop = make_op("average_pool", node, {x}, {y});
    set_ints(lop, "kernel", node.attr_ints("kernel_shape"));
    set_ints(lop, "strides", node.attr_ints("strides", {1, 1}));
    set_ints(lop, "pads", pads_of(node));
    set_ints(lop, "count_include_pad", {node.attr_int("count_include_pad", 0)});
    l.emit(std::move(lop));
    return Status::ok();
  }
  lowered::Op lop = make_op("max_pool", node, {}, {});
  if (op == "GlobalMaxPool") {
    const Shape s = l.shape(node.input(0));
    set_ints(lop, "kernel", {s[2], s[3]});
    set_ints(lop, "strides", {1, 1});
    set_ints(lop, "pads", {0, 0, 0, 0});
    set_ints(lop, "dilations", {1, 1});
  } else {
    set_ints(lop, "kernel", node.attr_ints("kernel_shape"));
    set_ints(lop, "strides", node.attr_ints("strides", {1, 1}));
    set_ints(lop, "pads", pads_of(node));
    set_ints(lop, "dilations", node.attr_ints("dilations", {1, 1}));
  }
  return emit_at_input_quant(l, node, std::move(lop), x);
}

std::string coordinate_mode(const Lowerer& l, const Node& node) {
  std::string mode = node.attr_string("coordinate_transformation_mode", "half_pixel");
  // pytorch_half_pixel differs from half_pixel only for an output length of 1.
  if (mode == "pytorch_half_pixel") {
    const Shape y = l.shape(node.output(0));
    if (y.size() == 4 && y[2] > 1 && y[3] > 1) mode = "half_pixel";
  }
  return mode;
}

std::string resize_gap(const Lowerer& l, const Node& node) {
  if (l.opset() < 11) return no_lowering(node, "before opset 11");
  const Shape x = l.shape(node.input(0));
  const Shape y = l.shape(node.output(0));
  if (x.size() != 4 || y.size() != 4 || x[0] != y[0] || x[1] != y[1])
    return no_lowering(node, "from " + shape_to_string(x) + " to " + shape_to_string(y) + " (spatial 2-D resizes only)");
  if (!l.quant(node.input(0))) return no_lowering(node, "with an input that is not quantized");
  const std::string mode = node.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return no_lowering(node, "in mode " + mode);
  const std::string cm = coordinate_mode(l, node);
  if (cm != "asymmetric" && cm != "half_pixel" && cm != "align_corners")
    return no_lowering(node, "with coordinate_transformation_mode " + cm);
  const std::string nm = node.attr_string("nearest_mode", "round_prefer_floor");
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
    return no_lowering(node, "with nearest_mode " + nm);
  if (node.attr_int("antialias", 0) != 0) return no_lowering(node, "with antialias");
  if (node.find_attribute("axes")) return no_lowering(node, "with axes");
  if (node.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch") return no_lowering(node, "with a keep_aspect_ratio_policy");
  return {};
}

Status lower_resize(Lowerer& l, const Node& node) {
  QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
  lowered::Op op = make_op("resize", node, {}, {});
  set_strings(op, "mode", {node.attr_string("mode", "nearest")});
  set_strings(op, "coordinate_mode", {coordinate_mode(l, node)});
  set_strings(op, "nearest_mode", {node.attr_string("nearest_mode", "round_prefer_floor")});
  return emit_at_input_quant(l, node, std::move(op), x);
}

}  // namespace

std::string gap_pool(const Lowerer& l, const Node& node) {
  return node.op_type() == "Resize" ? resize_gap(l, node) : pool_gap(l, node);
}

Status lower_pool(Lowerer& l, const Node& node) {
  return node.op_type() == "Resize" ? lower_resize(l, node) : lower_pool2d(l, node);
}

}  // namespace qflow::lowering
