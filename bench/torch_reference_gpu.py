#!/usr/bin/env python3
"""lockstep's runs in PyTorch on a GPU, for the side-by-side lines of
scripts/gpu_check.sh, on Fashion-MNIST with test accuracy after every epoch:
  mnist_net  configs/fashion_mnist.toml: batch 64, SGD lr 0.01 momentum 0.5
  resnet20   configs/resnet20_fashion_mnist.toml: batch 128, SGD lr 0.1
             momentum 0.9 weight decay 1e-4, cosine to 0 over the epochs
             (per step, as lockstep's), one input channel
The data set sits on the device (as lockstep keeps it); the loop is
PyTorch's ordinary eager one, in IEEE float32 (TF32 off, as lockstep's
fp32). Needs torch alone (no numpy: torch's wheels do not bring it).

  torch_reference.py --epochs 32 --data-dir data [--model mnist_net|resnet20]
                     [--device cuda] [--train-samples N] [--test-samples N]

Prints one JSON line: seconds, images_per_second, test_accuracy, device.
"""
import argparse
import gzip
import json
import math
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
    p.add_argument("--model", default="mnist_net", choices=["mnist_net", "resnet20"])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", default="cuda")
    p.add_argument("--train-samples", type=int, default=0, help="the first N (0: all)")
    p.add_argument("--test-samples", type=int, default=0, help="the first N (0: all)")
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
    if args.test_samples > 0:
        xte, yte = xte[:args.test_samples], yte[:args.test_samples]
    model = pytorch_models.make_model(args.model, in_channels=1).to(dev)
    if args.model == "mnist_net":
        batch, loss_of = 64, F.nll_loss  # its last layer is a log-softmax
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
        schedule = None
    else:
        batch, loss_of = 128, F.cross_entropy
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        steps = args.epochs * -(-len(xtr) // batch)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step / steps, 1.0))))
    if dev.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    correct = torch.zeros((), dtype=torch.int64, device=dev)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), device=dev)
        for i in range(0, len(perm), batch):
            idx = perm[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss_of(model(normalize(xtr[idx])), ytr[idx]).backward()
            opt.step()
            if schedule is not None:
                schedule.step()
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
                      "model": args.model,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
