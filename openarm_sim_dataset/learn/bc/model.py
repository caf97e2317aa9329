"""The behaviour-cloning networks: vector inputs (and camera images) -> a chunk of normalised actions.

Two architectures, named in the checkpoint's ``config["arch"]``:

* ``mlp`` (the state variant, and the first camera variant): a 3-layer CNN per camera with a shared
  trunk, average-pooled to a 3x4 grid, concatenated with the vector input into an MLP.
* ``keypoints`` (the camera variant of issue 25): one encoder per camera (cameras see different
  things, so they do not share weights): four 3x3 convolutions with GroupNorm (batch statistics would
  differ between training batches and the one-image batches of a rollout), then a spatial softmax
  (Levine et al. 2016, robomimic): each of ``keypoints`` feature maps becomes the expected image
  coordinates (x, y in [-1, 1], image frame: x right, y down) of its activation, so the MLP reads
  *where* things are, at sub-pixel precision, rather than *what* a pooled cell holds. An auxiliary
  head predicts the cubes' positions from the keypoints (training only; see :mod:`.trainer`).
"""

from __future__ import annotations

from . import import_torch


def build_model(cfg: dict):
    """The network of ``cfg`` (a checkpoint's config). ``forward(vec, images)`` returns
    ``(B, horizon, action_dim)``; the keypoint model's ``forward(..., aux=True)`` also returns the
    auxiliary prediction ``(B, aux_dim)``."""
    torch = import_torch()
    nn = torch.nn
    arch = cfg.get("arch", "mlp")

    class SpatialSoftmax(nn.Module):
        """(B, K, H, W) feature maps -> (B, 2K) expected (x, y) of each map's softmax, in [-1, 1]."""

        def __init__(self, h: int, w: int) -> None:
            super().__init__()
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
            self.register_buffer("xs", xs.reshape(1, 1, -1), persistent=False)
            self.register_buffer("ys", ys.reshape(1, 1, -1), persistent=False)

        def forward(self, x):
            b, k = x.shape[:2]
            p = torch.softmax(x.reshape(b, k, -1), dim=-1)
            return torch.cat([(p * self.xs).sum(-1), (p * self.ys).sum(-1)], dim=1)

    def conv(cin: int, cout: int, stride: int):
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.GroupNorm(max(1, cout // 8), cout), nn.ReLU()]

    class KeypointEncoder(nn.Module):
        def __init__(self, c: int, h: int, w: int, width: int, k: int) -> None:
            super().__init__()
            self.body = nn.Sequential(*conv(c, width, 2), *conv(width, width, 1), *conv(width, 2 * width, 2),
                                      *conv(2 * width, 2 * width, 1), nn.Conv2d(2 * width, k, 1))
            oh, ow = (h + 1) // 2, (w + 1) // 2
            oh, ow = (oh + 1) // 2, (ow + 1) // 2
            self.softmax = SpatialSoftmax(oh, ow)

        def forward(self, x):
            return self.softmax(self.body(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            hidden = int(cfg["hidden"])
            self.cams = list(cfg["cameras"])
            feat = 0
            if self.cams and arch == "mlp":
                # a small CNN per camera (shared weights), spatial features flattened
                c, h, w = cfg["image_shape"]
                self.cnn = nn.Sequential(
                    nn.Conv2d(c, 32, 5, stride=2, padding=2), nn.ReLU(),
                    nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                    nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                    nn.AdaptiveAvgPool2d((3, 4)), nn.Flatten())
                feat = 64 * 12 * len(self.cams)
            elif self.cams:
                c, h, w = cfg["image_shape"]
                k = int(cfg["keypoints"])
                self.encoders = nn.ModuleList(KeypointEncoder(c, h, w, int(cfg["conv_width"]), k) for _ in self.cams)
                feat = 2 * k * len(self.cams)
                if int(cfg.get("aux_dim", 0)):
                    self.aux = nn.Sequential(nn.Linear(feat, hidden), nn.ReLU(), nn.Linear(hidden, int(cfg["aux_dim"])))
            self.mlp = nn.Sequential(
                nn.Linear(int(cfg["vector_dim"]) + feat, hidden), nn.ReLU(),
                nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, int(cfg["horizon"]) * int(cfg["action_dim"])))

        def forward(self, vec, images: list | None = None, aux: bool = False):
            parts = [vec]
            feats = None
            if self.cams:
                if arch == "mlp":
                    parts += [self.cnn(im) for im in images]
                else:
                    feats = torch.cat([enc(im) for enc, im in zip(self.encoders, images)], dim=1)
                    parts.append(feats)
            out = self.mlp(torch.cat(parts, dim=1)).view(vec.shape[0], int(cfg["horizon"]), int(cfg["action_dim"]))
            if aux:
                return out, (self.aux(feats) if feats is not None and hasattr(self, "aux") else None)
            return out

    return Net()
