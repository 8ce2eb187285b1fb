"""The figures of docs/hardware.md, and the numbers quoted there, from fpsim's models.

    python benchmarks/hardware_figures.py [--out docs/hardware] [--n 16] [--seed 0]

accumulation_error.png: the normwise relative error ||C - C_exact||_F / ||C_exact||_F of an
n x K by K x n product of standard normal values rounded to E4M3 (seed ``--seed``), against K,
for each accumulator preset of ``fpsim.accumulators.PRESETS``. C_exact is the float64 product
(its own error, about 1e-16, is far below every model's).

rng_bits_bias.png: the mean error, in units of the last place, of stochastic rounding to bf16
of one value whose dropped fraction is f = 0.3203125, against the number of random bits r:
measured over 2^18 draws, beside the closed form floor(f 2^r) / 2^r - f.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

import fpsim
from fpsim import accumulators

MODELS = ["ieee_fp32", "ieee_fp16", "v100_tensor_core", "wang2018_fp16_chunk64",
          "hopper_fp8_fast", "hopper_fp8_promote128"]
FLOOR = 1e-9  # an exact result (error 0) is drawn here on the log axis
KS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]


def accumulation_errors(n: int, seed: int) -> dict[str, list[float]]:
    """{preset: [normwise relative error for each K in KS]}."""
    out: dict[str, list[float]] = {m: [] for m in MODELS}
    for k in KS:
        rng = np.random.default_rng(seed)
        a = fpsim.array(rng.standard_normal((n, k)), "e4m3fn")
        b = fpsim.array(rng.standard_normal((k, n)), "e4m3fn")
        exact = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
        for m in MODELS:
            got = fpsim.matmul(a, b, accumulate=m, fmt="fp32").numpy().astype(np.float64)
            out[m].append(float(np.linalg.norm(got - exact) / np.linalg.norm(exact)))
    return out


def rng_bits_bias(draws: int = 1 << 18) -> tuple[list[int], list[float], list[float]]:
    """(r values, measured mean error in ulps, closed form) for bf16, f = 41/128."""
    x, ulp, f = 1 + 2**-9 + 2**-11 + 2**-14, 2.0**-7, 41 / 128
    rs = list(range(1, 11))
    measured = [float(np.mean(fpsim.round(np.full(draws, x), "bf16", "stochastic", rng=r,
                                          rng_bits=r)) - x) / ulp for r in rs]
    closed = [math.floor(f * 2**r) / 2**r - f for r in rs]
    return rs, measured, closed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/hardware")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    errors = accumulation_errors(args.n, args.seed)
    print(f"{'preset':<24}" + "".join(f"{k:>10}" for k in KS))
    for m, errs in errors.items():
        print(f"{m:<24}" + "".join(f"{e:>10.2e}" for e in errs))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m, errs in errors.items():
        ax.loglog(KS, [max(e, FLOOR) for e in errs], marker="o", label=f"{m}")
    ax.set_xlabel("K (products per output)")
    ax.set_ylabel(f"normwise relative error (0 drawn at {FLOOR:g})")
    ax.set_title(f"{args.n}x{args.n} outputs, E4M3 inputs (standard normal, seed {args.seed})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "accumulation_error.png", dpi=120)
    print(f"wrote {out / 'accumulation_error.png'}")
    for m in MODELS:
        print(f"  {m}: {accumulators.PRESETS[m].source}")

    rs, measured, closed = rng_bits_bias()
    print("r, measured bias (ulp), closed form")
    for r, mb, cf in zip(rs, measured, closed, strict=True):
        print(f"{r:>3} {mb:>10.5f} {cf:>10.5f}")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(rs, closed, "k-", label="floor(f 2^r)/2^r - f")
    ax.plot(rs, measured, "o", label="measured, 2^18 draws")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("random bits r")
    ax.set_ylabel("mean error (ulp)")
    ax.set_title("stochastic rounding to bf16 with r random bits, f = 0.3203125")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "rng_bits_bias.png", dpi=120)
    print(f"wrote {out / 'rng_bits_bias.png'}")


if __name__ == "__main__":
    main()
