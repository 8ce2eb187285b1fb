"""NVFP4 training as Transformer Engine does it: a MODEL of TE's ``NVFP4BlockScaling`` recipe.

Sources: Transformer Engine's NVFP4 recipe (``transformer_engine/common/recipe``, its
``nvfp4_tensor.py``; docs "features/low_precision_training/nvfp4") and NVIDIA, "Pretraining
Large Language Models with NVFP4" (arXiv 2509.25149, 2025), section 4. Each component can be
switched off (TE's ``disable_*`` spellings):

- 1-D blocks of 16 (E4M3 block scale, fp32 tensor scale: ``fpsim.mx``'s "nvfp4") for
  activations and gradients, along each matmul's inner dimension;
- 2-D 16x16 weight blocks (``disable_2d_quantization``): one scale per 16x16 tile of the
  weight's last two axes, so the forward's weight and the dgrad's transposed weight are the
  same values (the paper's "consistent representations across passes");
- the random Hadamard transform (``fpsim.hadamard``, TE's fixed sign vector) on the two
  weight-gradient operands along their inner (token) axis (``disable_rht``): ``(Q a)^T (Q g) =
  a^T g`` for orthogonal Q, so only the quantization sees it;
- stochastic rounding of the gradients only (role "backward"; ``disable_stochastic_rounding``);
  activations and weights round to nearest even;
- ``four_over_six`` (Cook et al. 2025, "Four Over Six: More Accurate NVFP4 Quantization with
  Adaptive Block Scaling", arXiv 2512.02010; off by default, as TE has no such switch): each
  block is quantized with its scale mapping amax to 6 and to 4 and keeps the one of smaller
  squared error (a tie keeps 6). Ours: the tensor scale stays TE's ``amax / (6 * 448)``, so a
  block near the tensor's amax whose scale-to-4 exceeds E4M3's 448 saturates there and is
  judged by its (larger) error like any other;
- ``bf16_layers``: the layers (by name) kept in bf16, the paper's high-precision tail (its
  last ~15% of layers; ours: the user names them). Their operands are rounded to bf16, no
  block scaling.

Which operand is which is read from ``nn.fp8.ops``'s names: ``.../weight`` and
``.../weight_t`` are weights; a backward copy (``_t``) blocked along its second-to-last axis is
a weight-gradient operand. Telemetry: ``recipe.log`` rows as every recipe's (format
``"nvfp4"``, ``"nvfp4_2d"`` or ``"bfloat16"``), and ``recipe.changes`` counting what each
component touched (tensors transformed, tiled, rounded stochastically, kept in bf16; blocks
scaled to 4 of blocks seen).
"""

from __future__ import annotations

import zlib

import numpy as np

import fpsim
from fpsim import BF16, E2M1FN, E4M3FN
from fpsim import mx as fpsim_mx
from fpsim.hadamard import random_hadamard_transform
from nn.fp8.recipes import POLICY_RECIPES, Recipe, _amax, _role
from nn.fp8.state import TensorRecord

NVFP4 = fpsim_mx.BLOCK_FORMATS["nvfp4"]
TILE = 16  # 2-D weight tiles are TILE x TILE
# a 16x16 tile flattened into one block of 256: fpsim.mx's nvfp4 rules, one scale per tile
NVFP4_TILE = fpsim_mx.BlockFormat("nvfp4_2d", E2M1FN, TILE * TILE, E4M3FN)
CHANGES = ("rht_tensors", "tiled_tensors", "stochastic_tensors", "bf16_tensors",
           "blocks", "blocks_scaled_to_4")


def operand_use(name: str, axis: int, ndim: int) -> str:
    """What ``nn.fp8.ops`` quantizes under ``name``: "weight", "wgrad" (an operand of the
    weight gradient: a backward copy blocked along its second-to-last axis) or "other"."""
    operand = name.rpartition("/")[2]
    if operand in ("weight", "weight_t"):
        return "weight"
    if operand.endswith("_t") and ndim >= 2 and axis % ndim == ndim - 2:
        return "wgrad"
    return "other"


def _tiles(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """x's last two axes cut into TILE x TILE tiles (zero-padded), each tile a row of 256."""
    *lead, rows, cols = x.shape
    pr, pc = -rows % TILE, -cols % TILE
    padded = np.pad(x.reshape(-1, rows, cols), ((0, 0), (0, pr), (0, pc)))
    b, r, c = padded.shape
    t = padded.reshape(b, r // TILE, TILE, c // TILE, TILE).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(t.reshape(-1, TILE * TILE)), padded.shape


def _untiles(t: np.ndarray, padded: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    b, r, c = padded
    full = t.reshape(b, r // TILE, c // TILE, TILE, TILE).transpose(0, 1, 3, 2, 4)
    return full.reshape(b, r, c)[:, :shape[-2], :shape[-1]].reshape(shape)


def four_over_six(rows: np.ndarray, tensor_scale: float, mode: str = "nearest_even",
                  rng: object = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(values, scaled_to_4, saturated) of the float64 ``rows`` (one NVFP4 block per row)
    under 4/6: for each row the candidate scales ``amax / (c * tensor_scale)`` rounded to E4M3
    (nearest even, saturating) for c = 6 and c = 4, elements ``x / (scale * tensor_scale)``
    rounded to E2M1 (``mode``, saturating) and multiplied back (exact in float64); the
    candidate of smaller squared error wins, 6 on a tie. A NaN or inf makes its row NaN
    (fpsim.mx's rule). ``saturated``: elements beyond 6 times their chosen divisor."""
    amax = np.max(np.abs(rows), axis=1, initial=0.0)
    bad = ~np.isfinite(amax)
    best = best_d = None
    best_err = np.full(rows.shape[0], np.inf)
    to4 = np.zeros(rows.shape[0], bool)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for c in (6.0, 4.0):
            s = np.asarray(fpsim.round(np.where(bad, 0.0, amax) / (c * tensor_scale), E4M3FN,
                                       overflow="saturate"), np.float64)
            d = (s * tensor_scale)[:, None]
            live = d > 0
            el = np.asarray(fpsim.round(np.where(live, rows / np.where(live, d, 1.0), 0.0),
                                        E2M1FN, mode, overflow="saturate", rng=rng), np.float64)
            vals = np.where(live, el * d, np.copysign(0.0, rows))
            err = np.sum((rows - vals) ** 2, axis=1)
            take = err < best_err
            if best is None or best_d is None:
                best, best_d = vals, d
            else:
                best = np.where(take[:, None], vals, best)
                best_d = np.where(take[:, None], d, best_d)
                to4 = take
            best_err = np.where(take, err, best_err)
        assert best is not None and best_d is not None
        saturated = int(np.count_nonzero((np.abs(rows) > E2M1FN.max * best_d) & ~bad[:, None]))
    best[bad] = np.nan
    return best, to4 & ~bad, saturated


class NVFP4BlockScaling(Recipe):
    """NVFP4 training after Transformer Engine's recipe (see the module docstring: a model).

    >>> recipe = NVFP4BlockScaling(bf16_layers=("head",))
    >>> recipe.format("forward").name, recipe.format("backward").name
    ('nvfp4', 'nvfp4')
    """

    per_tensor = False

    def __init__(self, *, disable_rht: bool = False, disable_stochastic_rounding: bool = False,
                 disable_2d_quantization: bool = False, four_over_six: bool = False,
                 bf16_layers: tuple[str, ...] | list[str] = (), seed: int = 0) -> None:
        super().__init__()
        for flag, value in (("disable_rht", disable_rht),
                            ("disable_stochastic_rounding", disable_stochastic_rounding),
                            ("disable_2d_quantization", disable_2d_quantization),
                            ("four_over_six", four_over_six)):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{flag} must be a bool, got {value!r}")
        if isinstance(bf16_layers, str) or not all(isinstance(n, str) for n in bf16_layers):
            raise TypeError(f"bf16_layers must be a tuple of layer names, got {bf16_layers!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.rht = not disable_rht
        self.stochastic = not disable_stochastic_rounding
        self.two_d = not disable_2d_quantization
        self.four_over_six = bool(four_over_six)
        self.bf16_layers = tuple(bf16_layers)
        self.seed = int(seed)
        self.changes = dict.fromkeys(CHANGES, 0)

    def format(self, role: str) -> fpsim_mx.BlockFormat:
        _role(role)
        return NVFP4

    def reset(self) -> None:
        super().reset()
        self.changes = dict.fromkeys(CHANGES, 0)

    def _in_bf16_tail(self, name: str) -> bool:
        return any(part in self.bf16_layers for part in name.split("/")[:-2])

    def _rng(self, name: str, step: int) -> int:
        """The stochastic rounding seed of one quantization: the recipe's seed, the tensor's
        name and its step (reproducible, and resumed with the steps of ``state_dict``)."""
        return (self.seed * 1_000_003 + zlib.crc32(name.encode()) * 65_537 + step) % 2**63

    def _nvfp4(self, rows: np.ndarray, bf: fpsim_mx.BlockFormat, mode: str, rng: object,
               name: str) -> tuple[np.ndarray, int]:
        """(rows quantized to NVFP4, elements saturated): one block per ``bf.block`` of each
        C-contiguous row; 4/6 when switched on."""
        if not self.four_over_six:
            with fpsim.monitor() as m:
                q = fpsim_mx.quantize(rows, bf, axis=-1, mode=mode, rng=rng, site=name)
            return q, int(m.blocks.get(name, {"saturated": 0})["saturated"])
        n = rows.shape[-1]
        wide = np.pad(rows.astype(np.float64), ((0, 0), (0, -n % bf.block)))  # amax unchanged
        finite = np.abs(wide[np.isfinite(wide)])
        ts = fpsim_mx.tensor_scale_of(float(np.max(finite, initial=0.0)), bf)
        blocks = wide.reshape(-1, bf.block)
        vals, to4, saturated = four_over_six(blocks, ts, mode, rng)
        self.changes["blocks"] += int(blocks.shape[0])
        self.changes["blocks_scaled_to_4"] += int(np.count_nonzero(to4))
        return vals.reshape(wide.shape)[:, :n].astype(rows.dtype), saturated

    def quantize(self, x: np.ndarray, name: str, role: str, axis: int = -1
                 ) -> tuple[np.ndarray, float]:
        _role(role)
        step = self._steps.get(name, 0)
        self._steps[name] = step + 1
        if self._in_bf16_tail(name):
            self.changes["bf16_tensors"] += 1
            q = np.asarray(fpsim.round(x, BF16, site=name)).astype(x.dtype, copy=False)
            self.log.append(TensorRecord(name, role, BF16.name, step, _amax(x), 1.0,
                                         int(x.size), 0, int(np.count_nonzero((x != 0)
                                                                              & (q == 0)))))
            return q, 1.0
        use = operand_use(name, axis, x.ndim)
        stochastic = self.stochastic and role == "backward"
        mode = "stochastic" if stochastic else "nearest_even"
        rng = self._rng(name, step) if stochastic else None
        self.changes["stochastic_tensors"] += stochastic
        with np.errstate(over="ignore", invalid="ignore"):
            if use == "weight" and self.two_d and x.ndim >= 2:
                self.changes["tiled_tensors"] += 1
                tiles, padded = _tiles(x)
                tq, saturated = self._nvfp4(tiles, NVFP4_TILE, mode, rng, name)
                q = _untiles(tq, padded, x.shape)
                fmt, v = NVFP4_TILE.name, x
            else:
                v = x
                if use == "wgrad" and self.rht:
                    self.changes["rht_tensors"] += 1
                    v = random_hadamard_transform(x, axis=axis)
                moved = np.moveaxis(v, axis, -1)
                rows = np.ascontiguousarray(moved.reshape(-1, moved.shape[-1]))
                rq, saturated = self._nvfp4(rows, NVFP4, mode, rng, name)
                q = np.moveaxis(rq.reshape(moved.shape), -1, axis)
                fmt = NVFP4.name
        flushed = int(np.count_nonzero((v != 0) & (q == 0)))
        self.log.append(TensorRecord(name, role, fmt, step, _amax(x), 1.0, int(x.size),
                                     saturated, flushed))
        return np.ascontiguousarray(q, dtype=x.dtype), 1.0

    def config(self) -> tuple[object, ...]:
        return (type(self).__name__, self.rht, self.stochastic, self.two_d, self.four_over_six,
                list(self.bf16_layers), self.seed)

    def __repr__(self) -> str:
        return (f"NVFP4BlockScaling(disable_rht={not self.rht}, disable_stochastic_rounding="
                f"{not self.stochastic}, disable_2d_quantization={not self.two_d}, "
                f"four_over_six={self.four_over_six}, bf16_layers={self.bf16_layers!r}, "
                f"seed={self.seed})")


# The policy name of this recipe, added to recipes' one table of names (nn.fp8 imports this
# module, so the entry exists before any policy is parsed; recipes cannot import it back).
POLICY_RECIPES["nvfp4_te"] = NVFP4BlockScaling
