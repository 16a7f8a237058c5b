#!/usr/bin/env python3
"""The same models and runs in PyTorch, for side-by-side comparisons with
`lockstep bench` and `lockstep train` (see bench/compare_pytorch.sh).

  pytorch_reference.py throughput --model mnist_net --batch 64 --threads 1
  pytorch_reference.py reference-run --epochs 32 --threads 2

Only for benchmarks: lockstep itself needs no Python.
"""
import argparse
import gzip
import json
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# The networks, shared with the interoperability checks.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "interop"))
import pytorch_models  # noqa: E402


def make_model(name):
    """The model, the shape of one input and the loss lockstep trains it with."""
    loss = F.nll_loss if name == "mnist_net" else F.cross_entropy
    return pytorch_models.make_model(name), pytorch_models.input_shape(name), loss


def throughput(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    model, shape, loss_fn = make_model(args.model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    x = torch.rand(args.batch, *shape) * 4 - 1
    y = torch.arange(args.batch) % 10

    # bf16: PyTorch's mixed precision on the CPU (autocast; fp32 master weights)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def step():
        opt.zero_grad()
        with autocast:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    steps, start = 0, time.perf_counter()
    while True:
        for _ in range(5):
            step()
        steps += 5
        elapsed = time.perf_counter() - start
        if elapsed >= args.seconds:
            break
    print(json.dumps({"model": args.model, "batch": args.batch, "threads": args.threads,
                      "precision": args.precision, "torch": torch.__version__,
                      "images_per_second": args.batch * steps / elapsed}))


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, rows, cols)
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


def reference_run(args):
    """32 epochs of the reference network on Fashion-MNIST, train + test each
    epoch, as the workshop script does (batch 64, SGD lr 0.01 momentum 0.5)."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    d = args.data_dir
    normalize = lambda a: (torch.from_numpy(a.astype(np.float32) / 255.0) - 0.1307) / 0.3081
    xtr = normalize(read_idx(f"{d}/train-images-idx3-ubyte.gz"))
    ytr = torch.from_numpy(read_idx(f"{d}/train-labels-idx1-ubyte.gz"))
    xte = normalize(read_idx(f"{d}/t10k-images-idx3-ubyte.gz"))
    yte = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz"))
    model = pytorch_models.MnistNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        g = torch.Generator().manual_seed(42 + epoch)
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = F.nll_loss(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(xte), 1000):
                correct += (model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
        print(f"epoch {epoch + 1} test accuracy {100.0 * correct / len(xte):.2f}%", flush=True)
    total = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"epochs": args.epochs, "seconds": total, "threads": args.threads,
                      "test_accuracy": correct / len(xte), "peak_rss_mib": peak_mib}))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--model", default="mnist_net", choices=["mnist_net", "alexnet_cifar", "resnet20", "resnet32", "resnet44",
                            "resnet56", "resnet110"])
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--seconds", type=float, default=3.0)
    t.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    r = sub.add_parser("reference-run")
    r.add_argument("--epochs", type=int, default=32)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    throughput(args) if args.command == "throughput" else reference_run(args)


if __name__ == "__main__":
    main()
