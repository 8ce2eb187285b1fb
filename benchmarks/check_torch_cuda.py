"""fpsim.torch on CUDA against CPU: bit for bit, then timed. Needs a CUDA build of torch and a GPU.

    python benchmarks/check_torch_cuda.py [--n-log2 20] [--time-log2 26]

1. Rounding: random float32 and float64 bit patterns (NaN, inf, subnormals included) and a
   normal sample, rounded on CUDA and on the CPU to every catalog format in every
   deterministic mode (float32 nearest-even takes the cast / float32 paths, the rest the
   integer path): the bits must be equal. The CPU results are themselves checked against
   fpsim.round by the test suite.
2. Blocks: fpsim.torch.mx.quantize of every block format, scale rule and axis, float32 and
   float64, on CUDA equals the CPU's.
3. Timing: fpsim.torch.round of 2^time-log2 float32 on the GPU against torch's
   ``x.to(torch.float16).to(torch.float32)`` round trip on the same GPU (CUDA events), the
   block quantizers of mxfp8_e4m3 and nvfp4 likewise, and one SGD step of
   benchmarks/bench_models.py's char LM and CNN under ``fpsim.torch.emulate(model,
   "mixed_float16")`` against the same model's plain float32 step on the GPU (bench_torch's
   step, each step synchronised by its ``loss.item()``).

The whole test suite runs on the GPU with ``FPSIM_TORCH_DEVICE=cuda python -m pytest
tests/torch``. Exit status 1 if any comparison differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

import fpsim
import fpsim.torch as ft
from fpsim.kernels.mx import SCALE_RULES
from fpsim.mx import BLOCK_FORMATS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import CNN, LM  # noqa: E402
from bench_torch import _step  # noqa: E402
from timing import paired_median_seconds  # noqa: E402
from torch_models import models  # noqa: E402

MODES = [m for m in fpsim.MODE_NAMES if m != "stochastic"]


def _inputs(n: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(0)
    bits32 = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits64 = rng.integers(0, 2**63, n, dtype=np.int64).view(np.float64)
    normal = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    return [torch.from_numpy(a.copy()) for a in (bits32, bits64, normal)]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}
    return torch.equal(a.cpu().view(ints[a.dtype]), b.cpu().view(ints[b.dtype]))


def check_round(n: int) -> int:
    bad = 0
    for x in _inputs(n):
        xc = x.cuda()
        for fmt in fpsim.CATALOG:
            for mode in MODES:
                if not _same(ft.round(xc, fmt, mode), ft.round(x, fmt, mode)):
                    bad += 1
                    print(f"DIFFERS: round {x.dtype} -> {fmt.name} {mode}")
    print(f"round: {len(fpsim.CATALOG) * len(MODES) * 3} comparisons, {bad} differ")
    return bad


def check_mx(n: int) -> int:
    x = _inputs(n)[2].reshape(-1, 64)
    bad = 0
    for name in BLOCK_FORMATS:
        for rule in SCALE_RULES:
            for axis in (-1, 0):
                for xi in (x, x.double()):
                    if not _same(ft.mx.quantize(xi.cuda(), name, axis=axis, scale_rounding=rule),
                                 ft.mx.quantize(xi, name, axis=axis, scale_rounding=rule)):
                        bad += 1
                        print(f"DIFFERS: mx {name} {rule} axis {axis} {xi.dtype}")
    print(f"mx: {len(BLOCK_FORMATS) * len(SCALE_RULES) * 4} comparisons, {bad} differ")
    return bad


def _ms(fn, repeat: int = 20) -> float:
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def time_round(n_log2: int) -> None:
    x = torch.randn(2**n_log2, device="cuda")
    base = _ms(lambda: x.to(torch.float16).to(torch.float32))
    print(f"\n{torch.cuda.get_device_name()}: round of 2^{n_log2} float32 (median ms)")
    print(f"torch fp16 round trip {base:.3f} ms")
    for fmt, mode in (("float16", "nearest_even"), ("bfloat16", "nearest_even"),
                      ("float8_e4m3fn", "nearest_even"), ("float8_e4m3fn", "toward_zero"),
                      ("float4_e2m1fn", "nearest_even"), ("float16", "stochastic")):
        ms = _ms(lambda f=fmt, m=mode: ft.round(x, f, m))
        print(f"{fmt:<16}{mode:<14}{ms:8.3f} ms  ratio {base / ms:5.2f}")
    for name in ("mxfp8_e4m3", "nvfp4"):
        ms = _ms(lambda f=name: ft.mx.quantize(x, f))
        print(f"mx.quantize {name:<16}{ms:8.3f} ms  ratio {base / ms:5.2f}")


def time_train(repeat: int = 20) -> None:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, LM["vocab"], (LM["batch"], LM["length"] + 1), generator=gen).cuda()
    h, w, c = CNN["image"]
    images = torch.randn(CNN["batch"], c, h, w, generator=gen).cuda()
    labels = torch.randint(0, CNN["classes"], (CNN["batch"],), generator=gen).cuda()
    print(f"\none SGD step on the GPU, mixed_float16 emulated vs plain float32 "
          f"(medians of {repeat})")
    print(f"{'model':<10}{'emulated ms':>13}{'float32 ms':>12}{'ratio':>8}")
    for name, pick, x, y, classes in (
            ("char LM", 1, ids[:, :-1], ids[:, 1:], LM["vocab"]),
            ("CNN", 0, images, labels, CNN["classes"])):
        torch.manual_seed(0)
        plain = models(CNN, LM)[pick].cuda()
        torch.manual_seed(0)
        emulated = ft.emulate(models(CNN, LM)[pick].cuda(), "mixed_float16")
        ours, base = paired_median_seconds(_step(emulated, x, y, classes),
                                           _step(plain, x, y, classes), repeat)
        print(f"{name:<10}{ours * 1e3:>13.2f}{base * 1e3:>12.2f}{ours / base:>8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-log2", type=int, default=20)
    parser.add_argument("--time-log2", type=int, default=26)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU and a CUDA build of torch")
        return 2
    bad = check_round(2**args.n_log2) + check_mx(2**args.n_log2)
    time_round(args.time_log2)
    time_train()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
