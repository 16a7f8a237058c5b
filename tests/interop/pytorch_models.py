"""lockstep's model zoo in PyTorch, with the state_dict names lockstep uses:
the reference networks of the interoperability checks
(tests/interop/lockstep_interop.py) and of the speed comparisons
(bench/pytorch_reference.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MnistNet(nn.Module):
    """The reference workshop network (pytorch_mnist.py)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


class AlexnetCifar(nn.Module):
    """The reference CIFAR-10 network (pytorch_cifar10.py)."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=3, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(64, 192, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2))
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 2 * 2, 4096), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    """The CIFAR ResNet block of He et al. 2016 with the "option A" shortcut
    (every other pixel, zero-padded channels), as lockstep's basic_block."""

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.stride, self.extra = stride, planes - in_planes

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        shortcut = x
        if self.stride != 1 or self.extra:
            before = self.extra // 2
            shortcut = F.pad(x[:, :, ::self.stride, ::self.stride],
                             (0, 0, 0, 0, before, self.extra - before))
        return F.relu(out + shortcut)


class ResNetCifar(nn.Module):
    """resnet20/32/44/56/110: 3 stages of (depth - 2) / 6 blocks."""

    def __init__(self, depth, classes=10, in_channels=3):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        stages, in_planes = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            blocks = []
            for b in range(n):
                blocks.append(BasicBlock(in_planes, planes, stride if b == 0 else 1))
                in_planes = planes
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.linear = nn.Linear(64, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


RESNET_DEPTHS = (20, 32, 44, 56, 110)


def make_model(name, classes=10, in_channels=3):
    """The model named as lockstep names it (a ResNet's input channels:
    in_channels; the others' are fixed)."""
    if name == "mnist_net":
        return MnistNet(classes)
    if name == "alexnet_cifar":
        return AlexnetCifar(classes)
    if name.startswith("resnet") and int(name[6:]) in RESNET_DEPTHS:
        return ResNetCifar(int(name[6:]), classes, in_channels)
    raise ValueError(f"no PyTorch twin of model {name}")


def input_shape(name):
    """The (channels, height, width) of one input of model name."""
    return (1, 28, 28) if name == "mnist_net" else (3, 32, 32)
