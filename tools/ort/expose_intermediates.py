#!/usr/bin/python3
# Debugging aid for model tests: rewrites an ONNX model so that every node output is also a
# graph output, and lists the tensors in execution order. Running the rewritten model in both
# onnxruntime (tools/ort/run_ort.js) and `qflow infer` dumps every intermediate value, which
# tools/ort/first_divergence.js then walks to find the first node whose results disagree.
# Usage: expose_intermediates.py MODEL.onnx OUT.onnx ORDER.json
import json
import sys

import onnx


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: expose_intermediates.py MODEL.onnx OUT.onnx ORDER.json")
    model = onnx.load(sys.argv[1])
    graph = model.graph
    existing = {o.name for o in graph.output}
    inferred = onnx.shape_inference.infer_shapes(model)
    # Checkers (onnx's, hence qflow's) want a shape on every graph output; keep the inferred
    # type whole, symbolic dimensions included.
    infos = {v.name: v for v in inferred.graph.value_info
             if v.type.tensor_type.elem_type and v.type.tensor_type.HasField("shape")}
    order = []
    for index, node in enumerate(graph.node):
        for name in node.output:
            if not name:
                continue
            order.append({"tensor": name, "node": node.name or f"#{index}", "op": node.op_type,
                          "inputs": list(node.input)})
            # A tensor shape inference cannot type stays internal (shape arithmetic in practice).
            if name not in existing and name in infos:
                graph.output.append(infos[name])
                existing.add(name)
    onnx.save(model, sys.argv[2])
    with open(sys.argv[3], "w") as f:
        json.dump(order, f, indent=1)


if __name__ == "__main__":
    main()
