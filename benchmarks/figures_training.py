"""The training figures of docs/hardware.md, and the numbers quoted there, from nn's own code.

    python benchmarks/figures_training.py [--out docs/hardware] [--seed 0]

nvfp4_recipe.png: two switches of ``nn.fp8.NVFP4BlockScaling`` (a model of Transformer Engine's
NVFP4 recipe), each measured through the recipe's own ``quantize``.

- Left, the random Hadamard transform (``disable_rht``). The weight gradient ``a^T g`` of a
  layer with ``--tokens`` tokens and 256 inputs and outputs: ``a`` standard normal activations,
  ``g`` a standard normal gradient in which one element of every 16-token block (at a random
  place) is set to +-m, m swept from 1 to 1000 (the other elements' typical size is 1). Both
  operands are quantized as the recipe quantizes a weight gradient's operands (names
  ``.../input_t`` and ``.../grad_output_t``, blocks of 16 along the token axis, with the
  transform when it is on) and the float64 product of the two quantized operands is compared
  with the float64 product of the unquantized ones: ``||P - P_exact||_F / ||P_exact||_F``. As
  ``(Q a)^T (Q g) = a^T g``, this is the error of the product the recipe computes, transform
  included. Solid lines: every operand rounded to nearest (``disable_stochastic_rounding``);
  dashed: the recipe's default, the gradient rounded stochastically (seed ``--seed``).
- Right, 4/6 (``four_over_six``, Cook et al. 2025). The same standard normal matrix without
  outliers, quantized as a forward operand (1-D blocks of 16 along its rows, nearest) with the
  default scale (each block's amax mapped to 6) and with 4/6 (amax mapped to 6 or to 4,
  whichever gives the block the smaller squared error). One point per block: its relative
  error ``||q_b - x_b|| / ||x_b||`` under each rule.

bf16_remedies.png: ``--weights`` weights held in bfloat16 (``nn.Variable`` under the
"bfloat16" policy, no fp32 master copy) start at 1.0 and take ``--steps`` steps of
``nn.optimizers.SGD`` with learning rate 1e-4 and gradient -1, so each update adds 1e-4, about
1/78 of bf16's last place in [1, 2) (2^-7): with the default nearest-even update, with
``update_rounding="stochastic"`` (seed ``--seed``) and with ``kahan=True`` (Zamirai, Zhang,
Aberger, De Sa, "Revisiting BFloat16 Training", arXiv:2010.06192). "exact" is the float64 sum
``1 + t * float32(1e-4)`` of the updates the optimizer was given. Left: the weight against the
step (one weight, and the mean of all of them for stochastic rounding); right: the distance
from the exact sum in units of 2^-7, and for Kahan also that of ``w - c``, the weight less its
compensation (the sum the compensated update keeps).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import nn
from nn.fp8.nvfp4 import NVFP4BlockScaling
from nn.optimizers.remedies import COMPENSATION

BLOCK = 16  # NVFP4's block, and the transform's
FEATURES = 256  # the layer's inputs and outputs
OUTLIERS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]  # m, in units of the typical value
# (label, disable_rht, disable_stochastic_rounding) of the left panel's lines
RHT_CASES = [("no RHT, nearest", True, True), ("RHT, nearest", False, True),
             ("no RHT, stochastic gradient", True, False),
             ("RHT, stochastic gradient (TE's default)", False, False)]
# {rounding: (the line without the transform, the line with it)}
RHT_PAIRS = {"nearest": ("no RHT, nearest", "RHT, nearest"),
             "stochastic gradient": ("no RHT, stochastic gradient",
                                     "RHT, stochastic gradient (TE's default)")}
BF16_ULP = 2.0**-7  # bf16's last place in [1, 2)
LEARNING_RATE = 1e-4
REMEDIES = {"nearest": {}, "stochastic": {"update_rounding": "stochastic"},
            "kahan": {"kahan": True}}


def _relative(got: np.ndarray, exact: np.ndarray) -> float:
    return float(np.linalg.norm(got - exact) / np.linalg.norm(exact))


def gradient_like(seed: int, tokens: int) -> np.ndarray:
    """A ``tokens x FEATURES`` standard normal float32 matrix (seed ``seed``)."""
    return np.random.default_rng(seed).standard_normal((tokens, FEATURES)).astype(np.float32)


def with_outliers(g: np.ndarray, m: float, seed: int) -> np.ndarray:
    """``g`` with one element of every block of 16 along axis 0 (a random place, seed ``seed``)
    set to ``+-m`` (its sign kept)."""
    out = g.copy()
    bands = g.shape[0] // BLOCK
    rows = np.arange(bands)[:, None] * BLOCK + np.random.default_rng(seed + 1).integers(
        0, BLOCK, (bands, g.shape[1]))
    cols = np.arange(g.shape[1])[None, :]
    out[rows, cols] = np.where(g[rows, cols] < 0, -m, m)
    return out


def wgrad_error(a: np.ndarray, g: np.ndarray, recipe: NVFP4BlockScaling) -> float:
    """The normwise relative error of the weight gradient ``a^T g`` computed as ``recipe``
    computes it: both operands quantized along the token axis, their product in float64."""
    qa, _ = recipe.quantize(a, "d/Linear/input_t", "forward", axis=-2)
    qg, _ = recipe.quantize(g, "d/Linear/grad_output_t", "backward", axis=-2)
    exact = a.T.astype(np.float64) @ g.astype(np.float64)
    return _relative(qa.T.astype(np.float64) @ qg.astype(np.float64), exact)


def rht_errors(seed: int = 0, tokens: int = 256, outliers: Sequence[float] = OUTLIERS
               ) -> dict[str, list[float]]:
    """{line label of RHT_CASES: [wgrad_error for each m in ``outliers``]}."""
    a = np.random.default_rng(seed + 2).standard_normal((tokens, FEATURES)).astype(np.float32)
    g = gradient_like(seed, tokens)
    out: dict[str, list[float]] = {label: [] for label, _, _ in RHT_CASES}
    for m in outliers:
        gm = with_outliers(g, m, seed)
        for label, no_rht, no_sr in RHT_CASES:
            recipe = NVFP4BlockScaling(disable_rht=no_rht, disable_stochastic_rounding=no_sr,
                                       seed=seed)
            out[label].append(wgrad_error(a, gm, recipe))
    return out


def rht_ratios(errors: dict[str, list[float]]) -> dict[str, list[float]]:
    """{rounding of RHT_PAIRS: [error with the transform / error without, for each m]}."""
    return {rounding: [on / off for off, on in zip(errors[no], errors[yes], strict=True)]
            for rounding, (no, yes) in RHT_PAIRS.items()}


def block_errors(x: np.ndarray, four_over_six: bool) -> tuple[np.ndarray, float, int]:
    """(each 16-block's relative error, the normwise relative error, blocks scaled to 4) of
    ``x`` quantized by the recipe as a forward operand (blocks along its rows, nearest)."""
    recipe = NVFP4BlockScaling(four_over_six=four_over_six)
    q, _ = recipe.quantize(x, "d/Linear/input", "forward")
    x64, q64 = x.astype(np.float64).reshape(-1, BLOCK), q.astype(np.float64).reshape(-1, BLOCK)
    per_block = np.linalg.norm(q64 - x64, axis=1) / np.linalg.norm(x64, axis=1)
    return per_block, _relative(q64, x64), recipe.changes["blocks_scaled_to_4"]


def bf16_trajectories(steps: int = 2000, weights: int = 256, seed: int = 0,
                      learning_rate: float = LEARNING_RATE) -> dict[str, np.ndarray]:
    """{"exact": (steps + 1,) float64, and per remedy of REMEDIES a (steps + 1, weights)
    array of the bf16 weights after each step; "compensation": Kahan's slot after each step}.
    Every step is SGD's ``w - learning_rate * g`` with g = -1."""
    with nn.policy_scope("bfloat16"):
        variables = {name: nn.Variable(np.ones(weights, np.float32), name=name)
                     for name in REMEDIES}
    grad = np.full(weights, -1.0, np.float32)
    out: dict[str, np.ndarray] = {}
    for name, options in REMEDIES.items():
        w = variables[name]
        if options.get("update_rounding") == "stochastic":
            options = options | {"seed": seed}
        opt = nn.optimizers.SGD(learning_rate, **options)
        path, comp = [w.data.copy()], [np.zeros(weights, np.float32)]
        for _ in range(steps):
            opt.apply_gradients([(grad, w)])
            path.append(w.data.copy())
            if name == "kahan":
                comp.append(opt.get_slot(w, COMPENSATION).copy())
        out[name] = np.array(path)
        if name == "kahan":
            out["compensation"] = np.array(comp)
    update = float(np.float32(learning_rate))  # what SGD adds: float32(lr) * -g, exact
    out["exact"] = 1.0 + update * np.arange(steps + 1, dtype=np.float64)
    return out


def bf16_summary(paths: dict[str, np.ndarray]) -> dict[str, float]:
    """The numbers the bf16 paragraph quotes, in units of bf16's last place 2^-7 where named
    ``*_ulp``."""
    exact = paths["exact"]
    dev = {k: (paths[k].astype(np.float64) - exact[:, None]) / BF16_ULP for k in REMEDIES}
    kahan_sum = paths["kahan"].astype(np.float64) - paths["compensation"] - exact[:, None]
    return {
        "final_exact": float(exact[-1]),
        "final_nearest": float(paths["nearest"][-1, 0]),
        "nearest_ulp": float(np.max(np.abs(dev["nearest"]))),
        "final_stochastic_0": float(paths["stochastic"][-1, 0]),
        "stochastic_0_ulp": float(np.max(np.abs(dev["stochastic"][:, 0]))),
        "stochastic_mean_ulp": float(np.max(np.abs(dev["stochastic"].mean(axis=1)))),
        "final_kahan": float(paths["kahan"][-1, 0]),
        "kahan_ulp": float(np.max(np.abs(dev["kahan"]))),
        "kahan_sum_ulp": float(np.max(np.abs(kahan_sum)) / BF16_ULP),
        "kahan_drift": float(kahan_sum[-1, 0]),
        "kahan_drift_share": float(kahan_sum[-1, 0] / (exact[-1] - exact[0])),
    }


def _nvfp4_figure(plt, rht: dict[str, list[float]], blocks: dict[bool, tuple], tokens: int,
                  seed: int):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for label, no_rht, no_sr in RHT_CASES:
        left.semilogx(OUTLIERS, rht[label], color="C0" if no_rht else "C3",
                      ls="-" if no_sr else "--", marker="o" if no_sr else "s", label=label)
    left.set_xlabel("outlier magnitude m (one per 16-token block of g, typical value 1)")
    left.set_ylabel("normwise relative error of a^T g")
    left.set_title(f"random Hadamard transform: weight gradient a^T g,\na and g {tokens} "
                   f"tokens x {FEATURES} standard normal (seed {seed}), NVFP4", fontsize=10)
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    default, fos = blocks[False][0], blocks[True][0]
    to4 = fos < default
    lo, hi = float(min(default.min(), fos.min())), float(default.max())
    right.loglog([lo, hi], [lo, hi], "k-", lw=0.8, label="equal error")
    right.loglog(default[~to4], fos[~to4], ".", ms=3, color="C0",
                 label=f"kept amax -> 6 ({np.count_nonzero(~to4)} blocks)")
    right.loglog(default[to4], fos[to4], ".", ms=3, color="C2",
                 label=f"scaled amax -> 4 ({np.count_nonzero(to4)} blocks)")
    right.set_xlabel("block's relative error, default scale (amax -> 6)")
    right.set_ylabel("block's relative error, 4/6")
    right.set_title(f"4/6 vs default scale: the same {tokens} x {FEATURES} matrix, no outliers,"
                    f"\nblocks of 16; normwise error {blocks[False][1]:.4f} (default) -> "
                    f"{blocks[True][1]:.4f} (4/6)", fontsize=10)
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8)
    fig.suptitle("NVFP4 quantization through nn.fp8.NVFP4BlockScaling (a model of TE's "
                 "recipe)", fontsize=11)
    fig.tight_layout()
    return fig


def _bf16_figure(plt, paths: dict[str, np.ndarray], seed: int):
    steps = np.arange(paths["exact"].size)
    n = paths["nearest"].shape[1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    lines = [("exact (float64 sum)", paths["exact"], "k-"),
             ("nearest even", paths["nearest"][:, 0], "C3-"),
             (f"stochastic, one weight (seed {seed})", paths["stochastic"][:, 0], "C0-"),
             (f"stochastic, mean of {n} weights", paths["stochastic"].mean(axis=1), "C0--"),
             ("Kahan (bf16 compensation)", paths["kahan"][:, 0], "C2-")]
    for label, y, style in lines:
        left.plot(steps, y, style, lw=1, label=label)
        if not label.startswith("exact"):
            right.plot(steps, (np.asarray(y, np.float64) - paths["exact"]) / BF16_ULP, style,
                       lw=1, label=label)
    right.plot(steps, (paths["kahan"][:, 0] - paths["compensation"][:, 0].astype(np.float64)
                       - paths["exact"]) / BF16_ULP, "C1:", lw=1.5, label="Kahan, w - c")
    left.set_xlabel("step")
    left.set_ylabel("weight")
    left.set_title(f"{n} bf16 weights from 1.0, SGD lr {LEARNING_RATE:g}, gradient -1:\n"
                   "each update +1e-4, 1/78 of bf16's last place in [1, 2)", fontsize=10)
    right.axhline(0, color="grey", lw=0.5)
    right.set_ylim(-2.5, 5)
    final = (paths["nearest"][-1, 0] - paths["exact"][-1]) / BF16_ULP
    right.annotate(f"nearest even leaves the plot:\n{final:.1f} at step {steps[-1]}",
                   xy=(0.55 * steps[-1], -2.3), fontsize=8, color="C3", va="bottom")
    right.set_xlabel("step")
    right.set_ylabel("weight - exact (last places: units of 2^-7)")
    right.set_title("distance from the exact sum of the updates", fontsize=10)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/hardware")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=256, help="a multiple of 16")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--weights", type=int, default=256)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rht = rht_errors(args.seed, args.tokens)
    print("normwise relative error of a^T g against the outlier magnitude m")
    print(f"{'m':<42}" + "".join(f"{m:>8}" for m in OUTLIERS))
    for label, errs in rht.items():
        print(f"{label:<42}" + "".join(f"{e:>8.4f}" for e in errs))
    for rounding, ratios in rht_ratios(rht).items():
        worst = int(np.argmax(ratios))
        print(f"RHT / no RHT, {rounding}: {min(ratios):.3f} to {max(ratios):.3f} "
              f"(largest at m = {OUTLIERS[worst]})")
    x = gradient_like(args.seed, args.tokens)
    blocks = {f: block_errors(x, f) for f in (False, True)}
    print(f"4/6 on {args.tokens} x {FEATURES} standard normal: normwise {blocks[False][1]:.4f} "
          f"(default) -> {blocks[True][1]:.4f} (4/6); blocks scaled to 4: {blocks[True][2]} of "
          f"{blocks[True][0].size}; blocks worse under 4/6: "
          f"{int(np.count_nonzero(blocks[True][0] > blocks[False][0]))}")
    fig = _nvfp4_figure(plt, rht, blocks, args.tokens, args.seed)
    fig.savefig(out / "nvfp4_recipe.png", dpi=120)
    print(f"wrote {out / 'nvfp4_recipe.png'}")

    paths = bf16_trajectories(args.steps, args.weights, args.seed)
    for key, value in bf16_summary(paths).items():
        print(f"{key:<22} {value:.7g}")
    fig = _bf16_figure(plt, paths, args.seed)
    fig.savefig(out / "bf16_remedies.png", dpi=120)
    print(f"wrote {out / 'bf16_remedies.png'}")


if __name__ == "__main__":
    main()
