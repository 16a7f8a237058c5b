#!/usr/bin/env python3
"""lockstep's default run in PyTorch on a GPU, for the side-by-side line of
scripts/gpu_check.sh: mnist_net on Fashion-MNIST, batch 64, SGD lr 0.01
momentum 0.5, test accuracy after every epoch. The data set sits on the
device (as lockstep keeps it); the loop is PyTorch's ordinary eager one, in
IEEE float32 (TF32 off, as lockstep's fp32). Needs torch alone (no numpy:
torch's wheels do not bring it).

  torch_reference.py --epochs 32 --data-dir data [--device cuda] [--train-samples N]

Prints one JSON line: seconds, images_per_second, test_accuracy, device.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "interop"))
import pytorch_models  # noqa: E402


def read_idx(path):
    """An IDX file, raw or gzip-compressed (path without .gz)."""
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
    else:
        with gzip.open(path + ".gz", "rb") as f:
            data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        images = torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=16)
        return images.reshape(n, 1, rows, cols)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=8).long()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=32)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", default="cuda")
    p.add_argument("--train-samples", type=int, default=0, help="the first N (0: all)")
    args = p.parse_args()
    dev = torch.device(args.device)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(42)
    d = args.data_dir

    def load(name):
        return read_idx(f"{d}/{name}-ubyte").to(dev)

    def normalize(x):
        return (x.float() / 255.0 - 0.1307) / 0.3081

    xtr, ytr = load("train-images-idx3"), load("train-labels-idx1")
    if args.train_samples > 0:
        xtr, ytr = xtr[:args.train_samples], ytr[:args.train_samples]
    xte, yte = normalize(load("t10k-images-idx3")), load("t10k-labels-idx1")
    model = pytorch_models.MnistNet().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    correct = torch.zeros((), dtype=torch.int64, device=dev)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), device=dev)
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            opt.zero_grad(set_to_none=True)
            F.nll_loss(model(normalize(xtr[idx])), ytr[idx]).backward()
            opt.step()
        model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        with torch.no_grad():
            for i in range(0, len(xte), 1000):
                correct += (model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum()
        print(f"epoch {epoch + 1} test accuracy {100.0 * correct.item() / len(xte):.2f}%",
              flush=True)
    seconds = time.perf_counter() - start
    print(json.dumps({"epochs": args.epochs, "seconds": seconds,
                      "images_per_second": args.epochs * len(xtr) / seconds,
                      "test_accuracy": correct.item() / len(xte), "device": str(dev),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
