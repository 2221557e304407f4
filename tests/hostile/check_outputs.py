#!/usr/bin/python3
"""Checks that an output folder holds no half-written artifact.

Every artifact manifest.json lists must exist with the listed size and SHA-256; every .onnx
file must be accepted by `qflow inspect`; files the manifest does not list must not exist
(unless --killed: a run killed between an artifact's rename and the next manifest write
leaves a complete but unlisted file); temporary files of atomic writes ("<name>.tmp.<pid>")
must not exist (unless --killed: the next run removes them).

usage: check_outputs.py QFLOW DIR [--killed] [--failed STAGE] [--stages ID,ID,...]
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

TEMP = re.compile(r".+\.tmp\.[0-9]+$")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("qflow")
    parser.add_argument("folder")
    parser.add_argument("--killed", action="store_true", help="the run was killed: allow temp and unlisted files")
    parser.add_argument("--failed", help="the manifest must name this stage as the failed one")
    parser.add_argument("--stages", help="the manifest must list exactly these stage ids, in order ('none': no stage)")
    args = parser.parse_args()

    problems = []
    folder = args.folder
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    listed = {"manifest.json"}
    manifest = None
    if "manifest.json" in names:
        try:
            with open(os.path.join(folder, "manifest.json")) as f:
                manifest = json.load(f)
        except ValueError as e:
            problems.append(f"manifest.json does not parse: {e}")
    if manifest is not None:
        for stage in manifest.get("stages", []):
            artifact = stage["artifact"]
            listed.update(stage.get("side_files", []))  # named, not hashed: presence only
            if "path" not in artifact:  # kept in memory: nothing on disk to check
                continue
            path = os.path.join(folder, artifact["path"])
            listed.add(artifact["path"])
            if not os.path.isfile(path):
                problems.append(f"{artifact['path']}: listed in the manifest but absent")
                continue
            with open(path, "rb") as f:
                data = f.read()
            if len(data) != artifact["bytes"]:
                problems.append(f"{artifact['path']}: {len(data)} bytes, the manifest says {artifact['bytes']}")
            if hashlib.sha256(data).hexdigest() != artifact["sha256"]:
                problems.append(f"{artifact['path']}: SHA-256 differs from the manifest")
        ids = [stage["id"] for stage in manifest.get("stages", [])]
        expected = [] if args.stages == "none" else args.stages.split(",") if args.stages else None
        if expected is not None and ids != expected:
            problems.append(f"manifest lists stages {ids}, expected {expected}")
        failed = manifest.get("failed", {}).get("stage")
        if args.failed is not None and failed != args.failed:
            problems.append(f"manifest names failed stage {failed!r}, expected {args.failed!r}")
        if args.failed is not None and manifest.get("complete") is not False:
            problems.append("the manifest of a failed run must say complete: false")
    elif args.failed or args.stages:
        problems.append("no manifest.json")
    for name in names:
        path = os.path.join(folder, name)
        if TEMP.match(name):
            if not args.killed:
                problems.append(f"{name}: temporary file left behind")
            continue
        if name not in listed and not args.killed and manifest is not None:
            problems.append(f"{name}: not listed in the manifest")
        if name.endswith(".onnx"):
            result = subprocess.run([args.qflow, "inspect", path], capture_output=True, text=True)
            if result.returncode != 0:
                problems.append(f"{name}: qflow inspect refuses it: {result.stderr.strip()}")
    for p in problems:
        print(f"FAIL {folder}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
