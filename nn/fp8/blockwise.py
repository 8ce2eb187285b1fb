"""Float8 block scaling: fp8 tiles with float32 (by default power-of-two) scales, as Transformer
Engine's ``Float8BlockScaling`` recipe and DeepSeek-V3 (section 3.3) train.

- Activations and gradients: 1x128 tiles along the matmul's inner dimension (TE's
  ``x_block_scaling_dim=1``, ``grad_block_scaling_dim=1``); the backward's copies run along
  the new inner dimension (TE's "columnwise" 128x1 tiles).
- Weights (the operand named ``"weight"`` of ``linear``): 128x128 tiles over the last two axes
  (``w_block_scaling_dim=2``), the same tiles for the weight and its transpose. ``matmul``'s
  operands ``a`` and ``b`` are both treated as activations.
- Per tile (TE's ``compute_scale_from_amax``, ``nn.fp8.state.current_scale``): the amax is
  ``fmaxf`` over the tile (NaN skipped), raised to ``amax_epsilon``; ``scale = fp8_max / amax``
  in float32, rounded down to a power of two when ``power_2_scales`` (TE's default), so the
  tile's largest element never clips; a tile of zeros, or holding an inf, gets scale 1.
- Elements: ``float32(x * scale)`` cast to the fp8 format, nearest even, saturating (TE's cast
  kernels); the values handed to the matmul are ``element * float32(1 / scale)`` in float32
  (exact for power-of-two scales).
- Formats: "e4m3" (E4M3 everywhere, TE's default) or "hybrid" (E5M2 for gradients).

Memory: float32 throughout, a few copies of the operand (no float64 temporaries).

>>> import numpy as np
>>> recipe = Float8BlockScaling()
>>> q, inv = recipe.quantize(np.float32([[500.0, 1.0, -3.3]]), "t/input", "forward")
>>> q.tolist(), inv
([[512.0, 1.0, -3.25]], 1.0)
"""

from __future__ import annotations

import numpy as np

import fpsim
from fpsim import Format
from nn.engine.checks import number
from nn.fp8.recipes import FP8_FORMATS, POLICY_RECIPES, Recipe, _amax, _role
from nn.fp8.state import TensorRecord, current_scales

TILE = 128  # TE's and DeepSeek-V3's block length
BLOCK_DIMS = (1, 2)  # 1: 1x128 tiles along the inner dimension; 2: 128x128 tiles


def _tiles_1d(rows: np.ndarray) -> tuple[np.ndarray, int]:
    """(R, n) float32 -> (R, ceil(n / 128), 128), zero-padded; and n."""
    r, n = rows.shape
    pad = -n % TILE
    if pad:
        rows = np.concatenate([rows, np.zeros((r, pad), np.float32)], axis=1)
    return rows.reshape(r, -1, TILE), n


def _tile_amax(t: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """fmaxf over ``axes``: NaN skipped (0 for an all-NaN tile), inf kept."""
    a = np.abs(t)
    with np.errstate(invalid="ignore"):
        return np.max(np.where(np.isnan(a), np.float32(0), a), axis=axes)


class Float8BlockScaling(Recipe):
    """fp8 tiles with float32 scales (see the module docstring).

    Parameters (TE's names and defaults): ``fp8_format`` "e4m3" (or "hybrid"),
    ``x_block_scaling_dim=1``, ``w_block_scaling_dim=2``, ``grad_block_scaling_dim=1`` (1 or
    2; two operands of one GEMM may not both be 2-D, as in TE), ``power_2_scales=True``,
    ``amax_epsilon=0.0``.
    """

    per_tensor = False

    def __init__(self, fp8_format: str = "e4m3", x_block_scaling_dim: int = 1,
                 w_block_scaling_dim: int = 2, grad_block_scaling_dim: int = 1,
                 power_2_scales: bool = True, amax_epsilon: float = 0.0) -> None:
        super().__init__()
        if fp8_format not in FP8_FORMATS:
            raise ValueError(f"fp8_format must be one of {tuple(FP8_FORMATS)}, got "
                             f"{fp8_format!r}")
        dims = {"x_block_scaling_dim": x_block_scaling_dim,
                "w_block_scaling_dim": w_block_scaling_dim,
                "grad_block_scaling_dim": grad_block_scaling_dim}
        for arg, value in dims.items():
            if isinstance(value, bool) or value not in BLOCK_DIMS:
                raise ValueError(f"{arg} must be 1 (1x128 tiles) or 2 (128x128 tiles), got "
                                 f"{value!r}")
        two_d = [arg for arg, value in dims.items() if value == 2]
        if len(two_d) > 1:
            raise ValueError(f"{' and '.join(two_d)} are both 2: a GEMM of two 128x128-tiled "
                             "operands is not supported (as in Transformer Engine)")
        if not isinstance(power_2_scales, bool):
            raise TypeError(f"power_2_scales must be True or False, got {power_2_scales!r}")
        self.fp8_format = fp8_format
        self.x_dim, self.w_dim, self.grad_dim = (int(v) for v in dims.values())
        self.power_2 = power_2_scales
        self.amax_epsilon = number("amax_epsilon", amax_epsilon, lo=0.0)

    def format(self, role: str) -> Format:
        """E4M3FN for "forward"; E5M2 ("hybrid") or E4M3FN for "backward"."""
        return FP8_FORMATS[self.fp8_format][_role(role)]

    def block_dim(self, name: str, role: str) -> int:
        """1 or 2: the tiling of tensor ``name`` (its last path component says the operand)."""
        if role == "backward":
            return self.grad_dim
        operand = name.rpartition("/")[2].removesuffix("_t")
        return self.w_dim if operand == "weight" else self.x_dim

    def quantize(self, x: np.ndarray, name: str, role: str, axis: int = -1
                 ) -> tuple[np.ndarray, float]:
        fmt = self.format(role)
        step = self._steps.get(name, 0)
        self._steps[name] = step + 1
        values, saturated, flushed = self.quantize_tiles(x, fmt, self.block_dim(name, role),
                                                         axis, site=name)
        self.log.append(TensorRecord(name, role, fmt.name, step, _amax(x), 1.0, int(x.size),
                                     saturated, flushed))
        return values.astype(x.dtype, copy=False), 1.0

    def quantize_tiles(self, x: np.ndarray, fmt: Format, dim: int, axis: int = -1,
                       site: str | None = None) -> tuple[np.ndarray, int, int]:
        """(dequantized float32 values of ``x`` in ``dim``-D tiles along ``axis``, elements
        saturated, non-zero elements flushed to zero)."""
        arr = np.asarray(x, np.float32)
        if dim == 2:
            if arr.ndim < 2:
                raise ValueError(f"a 128x128-tiled operand needs 2 dimensions, got shape "
                                 f"{arr.shape}")
            moved = arr
        else:
            moved = np.moveaxis(np.atleast_1d(arr), axis, -1)
        shape = moved.shape
        if dim == 1:
            t, n = _tiles_1d(moved.reshape(-1, shape[-1]))
            amax = _tile_amax(t, (2,))
            scale = current_scales(amax, fmt.max, self.power_2, self.amax_epsilon)[..., None]
        else:
            r, c = shape[-2:]
            lead = moved.reshape(-1, r, c)
            pr, pc = -r % TILE, -c % TILE
            padded = np.pad(lead, ((0, 0), (0, pr), (0, pc))) if (pr or pc) else lead
            t = padded.reshape(lead.shape[0], (r + pr) // TILE, TILE, (c + pc) // TILE, TILE)
            amax = _tile_amax(t, (2, 4))
            scale = current_scales(amax, fmt.max, self.power_2,
                                   self.amax_epsilon)[:, :, None, :, None]
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            scaled = t * scale  # float32 products: TE's ``temp * s``
            q = np.asarray(fpsim.round(scaled, fmt, overflow="saturate", site=site), np.float32)
            saturated = int(np.count_nonzero(np.isfinite(scaled) & (np.abs(scaled) > fmt.max)))
            flushed = int(np.count_nonzero((t != 0) & (q == 0)))
            values = q * (np.float32(1) / scale)
        if dim == 1:
            out = values.reshape(values.shape[0], -1)[:, :n].reshape(shape)
            out = np.moveaxis(out, -1, axis) if arr.ndim else out.reshape(())
        else:
            out = values.reshape(lead.shape[0], r + pr, c + pc)[:, :r, :c].reshape(shape)
        return np.ascontiguousarray(out), saturated, flushed

    def config(self) -> tuple[object, ...]:
        return (type(self).__name__, self.fp8_format, self.x_dim, self.w_dim, self.grad_dim,
                self.power_2, self.amax_epsilon)

    def __repr__(self) -> str:
        return (f"Float8BlockScaling(fp8_format={self.fp8_format!r}, x_block_scaling_dim="
                f"{self.x_dim}, w_block_scaling_dim={self.w_dim}, grad_block_scaling_dim="
                f"{self.grad_dim}, power_2_scales={self.power_2}, amax_epsilon="
                f"{self.amax_epsilon!r})")


POLICY_RECIPES["fp8_blockwise"] = Float8BlockScaling  # the policy name (``nn.Policy``)
