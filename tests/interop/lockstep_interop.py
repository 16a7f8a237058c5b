"""Interoperability checks of lockstep's files with PyTorch, safetensors,
ONNX, onnxruntime and TensorBoard. Run by tests/test_interop.cpp with the
Python of build/pyenv (scripts/setup_test_deps.sh); exits 0 when every check
holds and prints the first difference otherwise.

  make-weights      a PyTorch model's state_dict saved with save_file (F32,
                    F16 and BF16 copies) and its outputs on given pixels
  check-export      lockstep's safetensors load into the PyTorch module
                    (strict) and reproduce lockstep's outputs; the ONNX file
                    passes the full checker and onnxruntime reproduces them
  check-tensorboard the event files hold the scalars of metrics.csv
"""
import argparse
import csv
import json
import math
import sys

import numpy as np
import torch
import torch.nn as nn

from pytorch_models import input_shape, make_model


def randomize_batchnorm(model):
    """Fresh BatchNorm layers are the identity in eval mode: give them
    statistics and affine parameters worth testing."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.num_batches_tracked.fill_(7)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def inputs(model, pixels_path, count, mean, std):
    """uint8 (count, C, H, W) pixels normalised as lockstep does."""
    shape = (count,) + input_shape(model)
    pixels = np.fromfile(pixels_path, dtype=np.uint8)
    if pixels.size != math.prod(shape):
        fail(f"{pixels_path}: {pixels.size} bytes, expected {shape}")
    x = torch.from_numpy(pixels.reshape(shape).astype(np.float32)) / 255.0
    c = shape[1]
    mean = torch.tensor((mean * c)[:c] if len(mean) == 1 else mean).view(1, c, 1, 1)
    std = torch.tensor((std * c)[:c] if len(std) == 1 else std).view(1, c, 1, 1)
    return (x - mean) / std


def compare(name, got, want, rtol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        fail(f"{name}: shape {got.shape}, expected {want.shape}")
    scale = max(np.abs(want).max(), 1e-30)
    err = np.abs(got - want).max() / scale
    if not err <= rtol:
        fail(f"{name}: largest difference {err:.3g} of the largest output (limit {rtol})")
    print(f"ok {name}: largest difference {err:.3g} of the largest output (limit {rtol})")


def make_weights(a):
    from safetensors.torch import save_file
    torch.manual_seed(a.seed)
    model = make_model(a.model)
    randomize_batchnorm(model)
    model.eval()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, f"{a.out_dir}/pt.safetensors")
    for dtype, tag in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        floats = {k: v for k, v in state.items() if v.is_floating_point()}
        save_file({k: v.to(dtype) for k, v in floats.items()}, f"{a.out_dir}/pt_{tag}.safetensors")
        save_file({k: v.to(dtype).float() for k, v in floats.items()},
                  f"{a.out_dir}/pt_{tag}_as_f32.safetensors")
    x = inputs(a.model, a.pixels, a.count, json.loads(a.mean), json.loads(a.std))
    with torch.no_grad():
        model(x).numpy().astype(np.float32).tofile(f"{a.out_dir}/pt_outputs.f32")
    print("ok make-weights")


def check_export(a):
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(a.weights, framework="pt") as f:
        meta = f.metadata()
    for key in ("model", "dataset", "class_names", "normalize_mean", "normalize_std",
                "lockstep_version", "input_shape"):
        if key not in meta:
            fail(f"{a.weights}: __metadata__ lacks {key}: {meta}")
    if meta["model"] != a.model:
        fail(f"{a.weights}: metadata model {meta['model']}, expected {a.model}")
    model = make_model(a.model, len(json.loads(meta["class_names"])))
    model.load_state_dict(load_file(a.weights), strict=True)
    model.eval()
    x = inputs(a.model, a.pixels, a.count, json.loads(meta["normalize_mean"]),
               json.loads(meta["normalize_std"]))
    with open(a.outputs) as f:
        rows = list(csv.reader(f))[1:]
    lockstep_out = np.array([[float(v) for v in r[1:]] for r in rows], np.float32)
    with torch.no_grad():
        torch_out = model(x).numpy()
    compare("PyTorch on lockstep's safetensors vs lockstep predict", torch_out, lockstep_out, 1e-5)
    if a.onnx:
        import onnx
        import onnxruntime
        onnx.checker.check_model(a.onnx, full_check=True)
        print("ok onnx.checker full check")
        proto = onnx.load(a.onnx)
        props = {p.key: p.value for p in proto.metadata_props}
        if json.loads(props.get("normalize_mean", "null")) != json.loads(meta["normalize_mean"]):
            fail(f"{a.onnx}: metadata normalize_mean {props.get('normalize_mean')}")
        session = onnxruntime.InferenceSession(a.onnx, providers=["CPUExecutionProvider"])
        ort_out = session.run(["output"], {"input": x.numpy()})[0]
        compare("onnxruntime vs lockstep predict", ort_out, lockstep_out, 1e-4)


def check_tensorboard(a):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(a.logdir, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    with open(a.metrics) as f:
        rows = list(csv.DictReader(f))
    pairs = json.loads(a.pairs)  # {"tag": "metrics.csv column"}
    for tag, column in pairs.items():
        if tag not in tags:
            fail(f"{a.logdir}: no scalar {tag} (has {tags})")
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if len(set(steps)) != len(steps):
            fail(f"{tag}: repeated steps {steps}")
        got = {e.step: e.value for e in events}
        want = {int(r["epoch"]): float(r[column]) for r in rows
                if r[column] not in ("", "nan")}
        if sorted(got) != sorted(want):
            fail(f"{tag}: epochs {sorted(got)}, metrics.csv has {sorted(want)}")
        for epoch, value in want.items():
            if not math.isclose(got[epoch], value, rel_tol=1e-4, abs_tol=1e-6):
                fail(f"{tag} epoch {epoch}: {got[epoch]} in TensorBoard, {value} in metrics.csv")
        print(f"ok {tag}: {len(events)} values equal metrics.csv {column}")
    if a.step_tag:
        steps = [e.step for e in acc.Scalars(a.step_tag)]
        if steps != sorted(set(steps)) or len(steps) != a.step_count:
            fail(f"{a.step_tag}: steps {steps}, expected {a.step_count} increasing, no repeats")
        print(f"ok {a.step_tag}: {len(steps)} increasing steps")
    if a.histogram_tag:
        events = acc.Histograms(a.histogram_tag)
        steps = [e.step for e in events]
        nums = {e.histogram_value.num for e in events}
        if steps != sorted(set(steps)) or len(steps) != a.histogram_epochs:
            fail(f"{a.histogram_tag}: steps {steps}, expected {a.histogram_epochs} epochs")
        if nums != {a.histogram_values}:
            fail(f"{a.histogram_tag}: counts {nums}, expected {a.histogram_values}")
        print(f"ok {a.histogram_tag}: {len(steps)} histograms of {a.histogram_values} values")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make-weights")
    m.add_argument("--model", required=True)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--pixels", required=True)
    m.add_argument("--count", type=int, required=True)
    m.add_argument("--mean", required=True)
    m.add_argument("--std", required=True)
    m.add_argument("--out-dir", required=True)
    c = sub.add_parser("check-export")
    c.add_argument("--model", required=True)
    c.add_argument("--weights", required=True)
    c.add_argument("--onnx", default="")
    c.add_argument("--pixels", required=True)
    c.add_argument("--count", type=int, required=True)
    c.add_argument("--outputs", required=True)
    t = sub.add_parser("check-tensorboard")
    t.add_argument("--logdir", required=True)
    t.add_argument("--metrics", required=True)
    t.add_argument("--pairs", required=True)
    t.add_argument("--step-tag", default="")
    t.add_argument("--step-count", type=int, default=0)
    t.add_argument("--histogram-tag", default="")
    t.add_argument("--histogram-epochs", type=int, default=0)
    t.add_argument("--histogram-values", type=int, default=0)
    a = p.parse_args()
    {"make-weights": make_weights, "check-export": check_export,
     "check-tensorboard": check_tensorboard}[a.command](a)
    print("PASS")


if __name__ == "__main__":
    main()
