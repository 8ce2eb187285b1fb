"""The block-scale figures of docs/hardware.md, and the numbers quoted there, from fpsim.

    python benchmarks/figures_blocks.py [--out docs/hardware] [--seed 0]

block_scale_rules.png: the three block-scale rounding rules of ``fpsim.mx.quantize(x, fmt,
scale_rounding=rule)`` on one MXFP4 (E2M1, block 32) block. Its largest element ``a`` sweeps
the binade [1, 2) on a grid of step 2^-10 (float32 values, exact); the other 31 elements are
one fixed draw (magnitudes uniform in [0.1, 0.3], random signs, seed ``--seed``), the same for
every ``a``. Left: the relative error |q(a) - a| / a of the largest element for each rule.
Right: the normwise relative error ||q(r) - r|| / ||r|| of the other 31 elements r. The
shared exponent ``e`` of each block is read from ``fpsim.mx.encode`` (E8M0 code - 127), and a
block "clips" when a / 2^e exceeds the element max (6), so the largest element saturates.

float8_tiles.png: Float8 block scaling with power-of-two fp32 scales
(``fpsim.mx.quantize_blockwise(x, "e4m3fn", block)``: the scale of a tile is the smallest
2^e with amax <= 448 * 2^e) in 1x128 and 128x128 tiles, against one such scale for the whole
tensor (``block = x.shape``: a single tile). x is an n x n float32 matrix (n = ``--n``, 256 by
default) of standard normal values (seed ``--seed``) whose row i is scaled by 2^(-s i / (n - 1)),
so its rows span s binades; s is swept from 0 to 40. Left: the normwise relative error
||Q(x) - x||_F / ||x||_F. Right: the mean over rows of each row's relative error
||Q(x_i) - x_i|| / ||x_i||, which weighs every row alike.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fpsim import mx

FORMAT = "mxfp4_e2m1"
RULES = ("floor", "ceil", "even")
RULE_LABELS = {"floor": "floor (OCP MX, the MX default)",
               "ceil": "ceil (Transformer Engine, torchao)",
               "even": "even (nearest)"}
TILES = {"per-tensor (one tile)": None, "128x128 tiles": (128, 128), "1x128 tiles": (1, 128)}
SPREADS = np.linspace(0.0, 40.0, 41)  # binades between the largest and the smallest row


class RuleSweep(NamedTuple):
    """One scale rule over the binade: arrays with one entry per value of a."""

    top: np.ndarray  # |q(a) - a| / a of the largest element
    rest: np.ndarray  # ||q(r) - r|| / ||r|| of the other elements
    exponent: np.ndarray  # the block's shared exponent e (scale 2^e)
    clipped: np.ndarray  # a / 2^e > the element max: the largest element saturates
    flushed: np.ndarray  # how many of the other elements round to zero


def binade_block(fmt: str = FORMAT, step: float = 2.0**-10, seed: int = 0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(a, x): a on [1, 2) in steps of ``step`` and x of shape (len(a), block), row j one block
    whose first element is a[j] and whose others are the same fixed draw for every row."""
    block = mx.get_block_format(fmt).block
    a = np.arange(1.0, 2.0, step).astype(np.float32)
    rng = np.random.default_rng(seed)
    rest = rng.uniform(0.1, 0.3, block - 1) * rng.choice([-1.0, 1.0], block - 1)
    x = np.empty((a.size, block), np.float32)
    x[:, 0] = a
    x[:, 1:] = rest.astype(np.float32)
    return a, x


def scale_rule_sweep(fmt: str = FORMAT, step: float = 2.0**-10, seed: int = 0
                     ) -> tuple[np.ndarray, dict[str, RuleSweep]]:
    """(a, {rule: RuleSweep}) for the blocks of ``binade_block``."""
    a, x = binade_block(fmt, step, seed)
    elem_max = mx.get_block_format(fmt).element.max
    a64, rest = a.astype(np.float64), x[:, 1:].astype(np.float64)
    out = {}
    for rule in RULES:
        q = mx.quantize(x, fmt, scale_rounding=rule).astype(np.float64)
        codes, _ = mx.encode(x, fmt, scale_rounding=rule)
        e = codes[:, 0].astype(np.int64) - 127  # E8M0: the biased exponent
        out[rule] = RuleSweep(
            top=np.abs(q[:, 0] - a64) / a64,
            rest=np.linalg.norm(q[:, 1:] - rest, axis=1) / np.linalg.norm(rest, axis=1),
            exponent=e,
            clipped=np.ldexp(a64, -e) > elem_max,
            flushed=np.sum(q[:, 1:] == 0, axis=1),
        )
    return a64, out


class TileErrors(NamedTuple):
    """One tiling over the spreads: arrays with one entry per spread."""

    normwise: np.ndarray  # ||Q(x) - x||_F / ||x||_F
    rowwise: np.ndarray  # mean over rows of ||Q(x_i) - x_i|| / ||x_i||
    flushed: np.ndarray  # fraction of the elements that round to zero


def spread_matrix(spread: float, n: int = 256, seed: int = 0) -> np.ndarray:
    """n x n float32 standard normal values, row i scaled by 2^(-spread i / (n - 1))."""
    rng = np.random.default_rng(seed)
    rows = np.exp2(-spread * np.arange(n) / max(n - 1, 1))
    return (rng.standard_normal((n, n)) * rows[:, None]).astype(np.float32)


def tile_errors(spreads: object = SPREADS, n: int = 256, seed: int = 0
                ) -> dict[str, TileErrors]:
    """{tiling: TileErrors} of E4M3 block scaling for the matrices of ``spread_matrix``."""
    res: dict[str, list[list[float]]] = {name: [[], [], []] for name in TILES}
    for s in np.asarray(spreads, dtype=np.float64):
        x = spread_matrix(float(s), n, seed)
        x64 = x.astype(np.float64)
        for name, block in TILES.items():
            q = mx.quantize_blockwise(x, "e4m3fn", block or x.shape).astype(np.float64)
            d = q - x64
            res[name][0].append(float(np.linalg.norm(d) / np.linalg.norm(x64)))
            rows = np.linalg.norm(d, axis=1) / np.linalg.norm(x64, axis=1)
            res[name][1].append(float(np.mean(rows)))
            res[name][2].append(float(np.mean((q == 0) & (x64 != 0))))
    return {name: TileErrors(*(np.array(v) for v in vals)) for name, vals in res.items()}


def _plot_rules(plt, a: np.ndarray, sweep: dict[str, RuleSweep], fmt: str,
                seed: int, path: Path) -> None:
    bf = mx.get_block_format(fmt)
    threshold = bf.element.max * 2.0**-bf.element.emax  # floor clips above it
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), sharex=True)
    # the curves coincide where the rules pick the same scale: floor drawn wide underneath
    styles = {"floor": dict(ls="-", lw=5, alpha=0.45), "ceil": dict(ls="--", lw=1.8),
              "even": dict(ls=":", lw=2.2, color="black")}
    for rule, r in sweep.items():
        left.plot(a, 100 * r.top, label=RULE_LABELS[rule], **styles[rule])
        right.plot(a, 100 * r.rest, label=RULE_LABELS[rule], **styles[rule])
    left.axvspan(threshold, 2.0, color="tab:red", alpha=0.08,
                 label=f"floor clips (a / 2^e > {bf.element.max:g})")
    even_clips = a[sweep["even"].clipped]
    if even_clips.size:
        left.axvspan(threshold, float(even_clips.max()), fill=False, hatch="//", lw=0,
                     alpha=0.15, label="even clips too")
    left.set_ylabel("relative error |q(a) - a| / a (%)")
    left.set_title("the largest element a")
    right.set_ylabel("normwise relative error ||q(r) - r|| / ||r|| (%)")
    right.set_title(f"the other {bf.block - 1} elements r (|r| uniform in [0.1, 0.3])")
    for ax in (left, right):
        ax.set_xlabel("largest element a of the block")
        ax.set_xlim(1.0, 2.0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"{fmt} (E2M1 elements, max {bf.element.max:g}, block {bf.block}, E8M0 "
                 f"scale): block-scale rounding rules, seed {seed}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_tiles(plt, spreads: np.ndarray, errors: dict[str, TileErrors], n: int,
                seed: int, path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), sharex=True)
    for (name, e), marker, ls in zip(errors.items(), "os^", ("-", "--", ":"), strict=True):
        left.plot(spreads, 100 * e.normwise, marker=marker, ls=ls, ms=3, label=name)
        right.plot(spreads, 100 * e.rowwise, marker=marker, ls=ls, ms=3, label=name)
    left.set_ylabel("||Q(x) - x||_F / ||x||_F (%)")
    left.set_title("normwise relative error (the three curves coincide)")
    left.set_ylim(0, 2 * 100 * max(float(e.normwise.max()) for e in errors.values()))
    right.set_ylabel("mean over rows of ||Q(x_i) - x_i|| / ||x_i|| (%)")
    right.set_title("row-wise relative error, mean over rows")
    right.set_ylim(0, 100)
    for ax in (left, right):
        ax.set_xlabel("spread s of the row magnitudes (binades)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"E4M3 with power-of-two scales, {n}x{n} standard normal (seed {seed}), "
                 f"row i scaled by 2^(-s i / {n - 1})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/hardware")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=256, help="matrix size of float8_tiles.png")
    parser.add_argument("--points", type=int, default=41,
                        help="spreads from 0 to 40 binades in float8_tiles.png")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    a, sweep = scale_rule_sweep(FORMAT, seed=args.seed)
    print(f"{FORMAT}, largest element a in [1, 2) step 2^-10, seed {args.seed}")
    print(f"{'rule':<6}{'max top err':>12}{'at a':>11}{'clips on':>22}{'top err a>1.75':>16}"
          f"{'rest err':>18}{'flushed':>10}")
    for rule, r in sweep.items():
        clips = (f"[{a[r.clipped].min():.6g}, {a[r.clipped].max():.6g}]" if r.clipped.any()
                 else "never")
        print(f"{rule:<6}{r.top.max():>12.5f}{a[np.argmax(r.top)]:>11.6g}{clips:>22}"
              f"{r.top[a > 1.75].max():>16.5f}"
              f"{f'{r.rest.min():.4f}-{r.rest.max():.4f}':>18}"
              f"{f'{r.flushed.min()}-{r.flushed.max()}':>10}")
    _plot_rules(plt, a, sweep, FORMAT, args.seed, out / "block_scale_rules.png")
    print(f"wrote {out / 'block_scale_rules.png'}")

    spreads = np.linspace(0.0, 40.0, args.points)
    errors = tile_errors(spreads, args.n, args.seed)
    print(f"E4M3, {args.n}x{args.n}, seed {args.seed}: normwise / mean row-wise error / "
          f"fraction flushed")
    print(f"{'s':>5}" + "".join(f"{name:>30}" for name in errors))
    for i, s in enumerate(spreads):
        print(f"{s:>5.1f}" + "".join(
            f"{f'{e.normwise[i]:.4f} / {e.rowwise[i]:.4f} / {e.flushed[i]:.3f}':>30}"
            for e in errors.values()))
    _plot_tiles(plt, spreads, errors, args.n, args.seed, out / "float8_tiles.png")
    print(f"wrote {out / 'float8_tiles.png'}")


if __name__ == "__main__":
    main()
