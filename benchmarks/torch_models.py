"""bench_models' CNN and LM in PyTorch CPU float32, stepped in a process of their own.

PyTorch's OpenMP threads and numpy's OpenBLAS threads keep spinning for a while after each
parallel call; in one process they fight for the same cores, and on a machine with other load
a step could take ten to a hundred times its quiet time (measured here: median PyTorch CNN
steps of 480 ms against 2.4 ms alone). So the PyTorch steps run in a child process that imports
neither nn nor fpsim: the parent sends the data once, then the name of one step at a time; the
child times the step itself (``time.perf_counter``) and sends the seconds back. Messages are
pickles over the child's stdin and stdout (``python benchmarks/torch_models.py`` is the child;
``TorchProcess`` the parent's end).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


def torch_steps(x_cnn: np.ndarray, y_cnn: np.ndarray, x_lm: np.ndarray, y_lm: np.ndarray,
                cnn: dict[str, Any], lm: dict[str, Any], lr: float
                ) -> dict[str, Callable[[], float]]:
    """The two models in PyTorch CPU float32, one SGD step each (empty if torch is not
    importable): CNN as bench_models.cnn_model, LM as bench_models.lm_model."""
    try:
        import torch
    except ImportError:
        return {}
    tnn = torch.nn
    torch.manual_seed(0)
    model_cnn, model_lm = models(cnn, lm)
    lm_params = list(model_lm.parameters())
    lm_forward = model_lm

    xc = torch.from_numpy(x_cnn.transpose(0, 3, 1, 2).copy())
    yc = torch.from_numpy(y_cnn)
    xl, yl = torch.from_numpy(x_lm), torch.from_numpy(y_lm)
    sgd_c = torch.optim.SGD(model_cnn.parameters(), lr=lr)
    sgd_l = torch.optim.SGD(lm_params, lr=lr)
    ce = tnn.CrossEntropyLoss()

    def step_cnn() -> float:
        sgd_c.zero_grad()
        loss = ce(model_cnn(xc), yc)
        loss.backward()
        sgd_c.step()
        return loss.item()

    def step_lm() -> float:
        sgd_l.zero_grad()
        loss = ce(lm_forward(xl).reshape(-1, lm["vocab"]), yl.reshape(-1))
        loss.backward()
        sgd_l.step()
        return loss.item()

    return {"cnn torch float32": step_cnn, "lm torch float32": step_lm}


def models(cnn: dict[str, Any], lm: dict[str, Any]) -> tuple[Any, Any]:
    """(CNN, LM) as torch modules (float32, CPU, initialised from torch's global generator):
    the CNN as bench_models.cnn_model, the LM as bench_models.lm_model (its forward takes token
    ids). benchmarks/bench_torch.py emulates them too."""
    import torch

    tnn = torch.nn
    model_cnn = tnn.Sequential(
        tnn.Conv2d(cnn["image"][2], cnn["filters"][0], 3, padding=1), tnn.ReLU(),
        tnn.MaxPool2d(2), tnn.Conv2d(cnn["filters"][0], cnn["filters"][1], 3, padding=1),
        tnn.ReLU(), tnn.MaxPool2d(2), tnn.AdaptiveAvgPool2d(1), tnn.Flatten(),
        tnn.Linear(cnn["filters"][1], cnn["classes"]))

    class LM(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = tnn.TransformerEncoderLayer(lm["dim"], lm["heads"], lm["ff"],
                                                     dropout=0.0, activation="gelu",
                                                     batch_first=True)
            self.tok = tnn.Embedding(lm["vocab"], lm["dim"])
            self.pos = tnn.Embedding(lm["length"], lm["dim"])
            self.head = tnn.Linear(lm["dim"], lm["vocab"])
            self.register_buffer(
                "mask", tnn.Transformer.generate_square_subsequent_mask(lm["length"]))

        def forward(self, ids: Any) -> Any:
            h = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            return self.head(self.block(h, src_mask=self.mask, is_causal=True))

    return model_cnn, LM()


def serve(inbox: BinaryIO, outbox: BinaryIO) -> None:
    """The child's loop: read the arguments of ``torch_steps``, answer with the step names
    (none without torch), then for each name read run that step once (after one untimed
    warm-up step each) and answer with its seconds; None ends the loop."""
    def send(obj: object) -> None:
        pickle.dump(obj, outbox)
        outbox.flush()

    steps = torch_steps(*pickle.load(inbox))
    for step in steps.values():
        step()
    send(sorted(steps))
    while (name := pickle.load(inbox)) is not None:
        t0 = time.perf_counter()
        steps[name]()
        send(time.perf_counter() - t0)


class TorchProcess:
    """The parent's end: ``TorchProcess(*torch_steps_args)``, ``.names`` (empty without
    torch), ``.time(name)`` -> seconds of one step, ``.close()`` -> the child's exit code."""

    def __init__(self, *args: Any) -> None:
        self._proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in, self._out = self._proc.stdout, self._proc.stdin
        self._send(args)
        self.names: list[str] = pickle.load(self._in)

    def _send(self, obj: object) -> None:
        pickle.dump(obj, self._out)
        self._out.flush()

    def time(self, name: str) -> float:
        self._send(name)
        seconds: float = pickle.load(self._in)
        return seconds

    def close(self) -> int:
        """End the child; its exit code."""
        self._send(None)
        return self._proc.wait()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
