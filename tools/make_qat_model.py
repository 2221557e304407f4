#!/usr/bin/python3
"""Builds the QAT Fashion-MNIST fixture: models/fashion_mnist/fashion_mnist_qat.onnx.

Starts from the float weights make_fashion_mnist.py left under --work-dir, runs PyTorch
quantization-aware training (torch.ao.quantization FX, prepare_qat_fx) for a short fine-tune
on the training set, then exports the fake-quantized model with torch.onnx.export at opset 13:
every fake-quant becomes a QuantizeLinear/DequantizeLinear pair (weights per output channel,
QuantizeLinear axis=0, int8 symmetric; activations per tensor, uint8 0..255). Also writes the
model's torch top-1 on the 10k test images to qat_accuracy.txt.

Two workarounds for torch 1.13 (docs/fixtures.md has the details):
  * the default QAT qconfig (version 1) uses FusedMovingAvgObsFakeQuantize, whose
    aten::fused_moving_avg_obs_fake_quant has no ONNX symbolic; version 0 of the qconfig
    (separate MovingAverageMinMaxObserver + FakeQuantize) exports;
  * fbgemm's activation fake-quants use reduce_range (0..127), exported as QuantizeLinear ->
    Clip(max 127) -> DequantizeLinear; an NPU has no reason for the reduced range, so the
    activations use the full 0..255 (the weights keep fbgemm's per-channel int8 fake-quant).
Before export the observers are disabled (otherwise the trace records the observers'
min/max updates, and the exported scales would be computed from each input) and BatchNorm
statistics are frozen; each fused ConvBn2d QAT module is then replaced by a plain QAT Conv2d
holding the folded weight (exactly the tensor the fake-quant saw) and folded bias, so the
ONNX reads DequantizeLinear(weight) -> Conv(bias) instead of Conv -> Div -> BatchNormalization.
After export, tidy_qdq removes Identity aliases and makes per-tensor scales scalars.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist_data  # noqa: E402
import make_fashion_mnist  # noqa: E402


def qat_qconfig_mapping():
    """fbgemm's default QAT qconfig mapping, version 0 (separate observer and fake-quant
    modules), with every reduced-range (0..127) activation fake-quant replaced by a full-range
    one (0..255); weights keep fbgemm's per-channel symmetric int8 fake-quant, fixed-qparams
    ops (sigmoid, tanh, ...) keep their own configs."""
    from torch.ao.quantization import (FakeQuantize, MovingAverageMinMaxObserver, QConfig,
                                       get_default_qat_qconfig_mapping)
    activation = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver,
                                        quant_min=0, quant_max=255, reduce_range=False)

    def full_range(qconfig):
        keywords = getattr(getattr(qconfig.activation, "p", None), "keywords", {})
        if keywords.get("reduce_range"):
            return QConfig(activation=activation, weight=qconfig.weight)
        return qconfig

    mapping = get_default_qat_qconfig_mapping("fbgemm", version=0)
    mapping.set_global(full_range(mapping.global_qconfig))
    for object_type, qconfig in list(mapping.object_type_qconfigs.items()):
        if qconfig is not None:
            mapping.set_object_type(object_type, full_range(qconfig))
    return mapping


def fold_conv_bn(prepared):
    """Replaces every fused ConvBn2d QAT module by a QAT Conv2d computing the same thing in
    eval mode: weight * gamma / sqrt(running_var + eps) under the same weight fake-quant, and
    the folded bias."""
    import torch.nn.intrinsic.qat as nniqat
    import torch.nn.qat as nnqat
    for name, module in list(prepared.named_modules()):
        if type(module) is not nniqat.ConvBn2d:
            continue
        bn = module.bn
        std = torch.sqrt(bn.running_var + bn.eps)
        scale = bn.weight / std
        conv = nnqat.Conv2d(module.in_channels, module.out_channels, module.kernel_size,
                            module.stride, module.padding, module.dilation, module.groups,
                            bias=True, padding_mode=module.padding_mode, qconfig=module.qconfig)
        conv.weight_fake_quant = module.weight_fake_quant
        with torch.no_grad():
            conv.weight.copy_(module.weight * scale.reshape(-1, 1, 1, 1))
            bias = module.bias if module.bias is not None else torch.zeros_like(bn.running_mean)
            conv.bias.copy_((bias - bn.running_mean) * scale + bn.bias)
        parent_name, _, child = name.rpartition(".")
        setattr(prepared.get_submodule(parent_name) if parent_name else prepared, child, conv)
    prepared.recompile()
    return prepared.eval()


def tidy_qdq(path):
    """Two clean-ups of torch's export, which change no computed value:
    * torch.onnx.export leaves Identity nodes that only alias shared zero-point constants;
      their consumers are rewired to the aliased value;
    * per-tensor scales and zero points come out as 1-element 1-D tensors; the ONNX spec has
      per-tensor QuantizeLinear/DequantizeLinear take scalars (a 1-D tensor means per-axis),
      so they become scalars."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    graph = model.graph
    alias = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Identity"}
    outputs = {o.name for o in graph.output}
    keep = []
    for node in graph.node:
        if node.op_type == "Identity" and node.output[0] not in outputs:
            continue
        for i, name in enumerate(node.input):
            while name in alias and name not in outputs:
                name = alias[name]
            node.input[i] = name
        keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)

    qdq = ("QuantizeLinear", "DequantizeLinear")
    per_tensor, per_axis = set(), set()
    for node in graph.node:
        if node.op_type in qdq:
            axis = any(a.name == "axis" for a in node.attribute)
            (per_axis if axis else per_tensor).update(node.input[1:3])
        else:
            per_axis.update(node.input)  # any other use: leave the tensor as it is
    for init in graph.initializer:
        if init.name in per_tensor and init.name not in per_axis and list(init.dims) == [1]:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).reshape(()),
                                                  init.name))
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return [n.op_type for n in graph.node]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default=make_fashion_mnist.DEFAULT_OUT_DIR)
    parser.add_argument("--work-dir", default=make_fashion_mnist.DEFAULT_WORK_DIR)
    parser.add_argument("--data-dir", default=fashion_mnist_data.DEFAULT_DIR)
    parser.add_argument("--steps", type=int, default=300, help="QAT fine-tune batches")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args()

    from torch.ao.quantization import disable_observer
    from torch.nn.intrinsic.qat import freeze_bn_stats
    from torch.ao.quantization.quantize_fx import prepare_qat_fx

    make_fashion_mnist.setup_determinism()
    t0 = time.time()
    state_path = os.path.join(args.work_dir, make_fashion_mnist.STATE_DICT)
    if not os.path.exists(state_path):
        sys.exit(f"make_qat_model.py: {state_path} is missing: run tools/make_fashion_mnist.py "
                 f"--work-dir {args.work_dir} first")
    x_train, y_train = fashion_mnist_data.load("train", args.data_dir)
    x_test, y_test = fashion_mnist_data.load("test", args.data_dir)
    model = make_fashion_mnist.FashionMobileNet()
    model.load_state_dict(torch.load(state_path))

    model.train()
    prepared = prepare_qat_fx(model, qat_qconfig_mapping(), (torch.zeros(1, 1, 28, 28),))
    generator = torch.Generator().manual_seed(make_fashion_mnist.SEED + 1)
    optimizer = torch.optim.Adam(prepared.parameters(), lr=args.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.steps)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    order = torch.cat([torch.randperm(len(x_train), generator=generator)
                       for _ in range(args.steps * args.batch_size // len(x_train) + 1)])
    t_qat = time.time()
    total = 0.0
    for step in range(args.steps):
        if step == args.steps // 2:
            prepared.apply(freeze_bn_stats)
        if step == args.steps * 3 // 4:
            prepared.apply(disable_observer)
        idx = order[step * args.batch_size:(step + 1) * args.batch_size]
        optimizer.zero_grad()
        loss = loss_fn(prepared(xt[idx]), yt[idx])
        loss.backward()
        optimizer.step()
        schedule.step()
        total += float(loss)
        if (step + 1) % 100 == 0:
            print(f"QAT step {step + 1}/{args.steps}: mean loss {total / 100:.4f} "
                  f"({time.time() - t_qat:.0f} s)")
            total = 0.0
    t_qat = time.time() - t_qat
    prepared.apply(disable_observer)
    prepared.apply(freeze_bn_stats)
    prepared.eval()
    qat_top1 = make_fashion_mnist.evaluate(prepared, x_test, y_test)

    folded = fold_conv_bn(prepared)
    folded_top1 = make_fashion_mnist.evaluate(folded, x_test, y_test)
    print(f"QAT fake-quant test top-1 {qat_top1:.4f} (with BatchNorm folded for export: "
          f"{folded_top1:.4f}), fine-tune took {t_qat:.0f} s")

    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "fashion_mnist_qat.onnx")
    torch.onnx.export(folded, torch.zeros(1, 1, 28, 28), path, opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.EVAL)
    ops = tidy_qdq(path)
    histogram = {op: ops.count(op) for op in sorted(set(ops))}
    if not histogram.get("QuantizeLinear") or not histogram.get("DequantizeLinear"):
        raise RuntimeError(f"{path}: no QuantizeLinear/DequantizeLinear pairs: {histogram}")
    with open(os.path.join(args.out_dir, "qat_accuracy.txt"), "w") as f:
        f.write(f"{folded_top1:.4f}\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes, ops {histogram}) and "
          f"qat_accuracy.txt; total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
