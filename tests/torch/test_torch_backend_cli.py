"""``fpsim compare --backend torch`` through the command line: seeds, the results file in nn's
schema (read back by the report), verdicts, the picture, the what-if's file, exit codes. The
experiments run at a tiny size (the table's entry shrunk for the test, 2 steps)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fpsim.cli import main  # noqa: E402
from nn.experiments import report, torch_backend  # noqa: E402
from nn.experiments.cnn import CNNConfig  # noqa: E402
from nn.experiments.intervals import NOT_SHOWN, SHOWN  # noqa: E402
from nn.experiments.table import EXPERIMENTS  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "experiments.json"


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch experiments' table entries at a test's size: 16 characters x 4 windows for
    the LM, 8 digits a batch for the CNN."""
    for name in torch_backend.SUPPORTED:
        entry = EXPERIMENTS[name]
        small = (entry.config.with_(batch_size=8) if isinstance(entry.config, CNNConfig)
                 else entry.config.with_(sequence_length=16, batch_size=4))
        monkeypatch.setitem(EXPERIMENTS, name, dataclasses.replace(entry, config=small))


def test_two_seeds_on_torch_write_nn_results_schema_with_verdicts_that_the_report_reads(
        tiny: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.json"
    assert main(["compare", "--backend", "torch", "--experiment", "underflow", "--seeds", "2",
                 "--steps", "2", "--scale", "2", "--json", str(path), "--out",
                 str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    r = json.loads(path.read_text())
    assert {"backend": "torch", "device": "cpu", "scale": 2}.items() <= r.items()
    nn_entry = json.loads(RESULTS.read_text())[0]
    assert set(nn_entry) <= set(r)  # every field of nn's results file, and the backend's
    assert r["seeds"] == [0, 1] and r["steps"] == 2 and r["processes"] == 1
    assert "d=64, 4 heads, ff 128" in r["config"]  # --scale 2 of d=32, 2 heads, ff 64
    assert "--backend torch --device cpu --scale 2" in r["command"]
    labels = [v.label for v in torch_backend.SUPPORTED["underflow"]]
    assert [v["label"] for v in r["variants"]] == labels
    by_seed = {s["seed"]: s["test_loss"] for s in r["per_seed"]}
    assert [c["name"] for c in r["claims"]] == [c.name for c in EXPERIMENTS["underflow"].claims]
    for c in r["claims"]:
        assert c["verdict"] in (SHOWN, NOT_SHOWN) and c["reason"]
        assert c["gaps"] == pytest.approx(  # paired by seed: variant minus reference
            [by_seed[s][c["variant"]] - by_seed[s][c["reference"]] for s in (0, 1)], abs=2e-6)
        assert c["verdict"].upper() in printed
    page = report.render([r])
    assert "| underflow | loss scaling | mixed_float16, no scaling > float32 | 2 |" in page
    assert ("Reproduce: `fpsim compare --experiment underflow --seeds 2 --backend torch "
            "--device cpu --scale 2`") in page
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_master_weights_on_the_torch_cnn_writes_its_verdict_and_nn_findings(
        tiny: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mw.json"
    assert main(["compare", "--backend", "torch", "--experiment", "master-weights", "--seeds",
                 "2", "--steps", "2", "--scale", "2", "--json", str(path), "--out",
                 str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    r = json.loads(path.read_text())
    assert {"backend": "torch", "device": "cpu", "scale": 2}.items() <= r.items()
    assert set(json.loads(RESULTS.read_text())[0]) <= set(r)
    assert "Conv2D 3x3 (32, 64)" in r["config"] and "Adam lr 0.0003" in r["config"]
    (c,) = r["claims"]
    assert (c["variant"], c["reference"]) == ("float16 (no master)",
                                              "mixed_float16 (fp32 masters)")
    assert c["verdict"] in (SHOWN, NOT_SHOWN) and c["reason"] and len(c["gaps"]) == 2
    by_seed = {s["seed"]: s["test_loss"] for s in r["per_seed"]}
    assert c["gaps"] == pytest.approx(
        [by_seed[s][c["variant"]] - by_seed[s][c["reference"]] for s in (0, 1)], abs=2e-6)
    assert c["verdict"].upper() in printed
    assert any("of weight updates swamped" in line for line in r["findings_first_seed"])
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_all_on_torch_runs_each_supported_experiment_into_one_list(
        tiny: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    real = torch_backend.run_config

    def counted(name: str, config: object, **kwargs: object) -> object:
        ran.append(name)
        return real(name, config, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch_backend, "run_config", counted)
    monkeypatch.setattr(torch_backend, "warm_up", lambda name, device="cpu": 0.0)
    path = tmp_path / "all.json"
    assert main(["compare", "--backend", "torch", "--all", "--seeds", "1", "--steps", "1",
                 "--json", str(path), "--out", str(tmp_path)]) == 0
    found = json.loads(path.read_text())
    assert [r["experiment"] for r in found] == list(torch_backend.SUPPORTED) == ran
    assert all(r["backend"] == "torch" for r in found)
    assert {p.name for p in tmp_path.glob("*.png")} == {f"{n}.png" for n in ran}


def test_what_if_on_torch_writes_its_replay_with_the_backend(
        tiny: None, tmp_path: Path) -> None:
    path = tmp_path / "whatif.json"
    assert main(["compare", "--backend", "torch", "--what-if", "--experiment", "underflow",
                 "--steps", "2", "--json", str(path)]) == 0
    found = json.loads(path.read_text())
    assert found["backend"] == "torch" and found["steps"] == [0, 1]
    assert set(found["alternatives"]) == {"float32", "unscaled fp16", "scaled fp16",
                                          "mixed_bfloat16"}
    assert found["alternatives"]["float32"]["cosine"] == pytest.approx(1.0, abs=1e-12)


def test_an_unwritable_json_or_an_nn_only_experiment_exits_non_zero_before_training(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_backend, "warm_up", pytest.fail)  # nothing may train
    (tmp_path / "file").write_text("")
    assert main(["compare", "--backend", "torch", "--experiment", "bf16", "--json",
                 str(tmp_path / "file" / "r.json")]) != 0
    assert "--json" in capsys.readouterr().err
    assert main(["compare", "--backend", "torch", "--experiment", "digits"]) != 0
    assert "'digits' runs on --backend nn only" in capsys.readouterr().err


def test_resume_on_torch_keeps_entries_of_the_same_backend_device_and_scale_only(
        tiny: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []

    def fake(name: str, config: object, **kwargs: object) -> object:
        ran.append(name)
        raise RuntimeError("stop here")  # (only which experiments would run matters)

    monkeypatch.setattr(torch_backend, "warm_up", lambda name, device="cpu": 0.0)
    names = list(torch_backend.SUPPORTED)
    common = {"seeds": [0], "steps": 1}
    entries = [{"experiment": names[0], **common, "backend": "torch", "device": "cpu",
                "scale": 1, "marker": "kept"},
               {"experiment": names[1], **common, "backend": "torch", "device": "cpu",
                "scale": 2},  # another scale: rerun
               {"experiment": names[2], **common}]  # nn's (no backend): rerun
    entries += [{"experiment": n, **common, "backend": "torch", "device": "cpu", "scale": 1}
                for n in names[3:]]
    path = tmp_path / "all.json"
    path.write_text(json.dumps(entries))
    monkeypatch.setattr(torch_backend, "run_config", fake)
    with pytest.raises(RuntimeError, match="stop here"):
        main(["compare", "--backend", "torch", "--all", "--resume", "--seeds", "1", "--steps",
              "1", "--processes", "1", "--json", str(path), "--out", str(tmp_path)])
    assert ran == [names[1]]  # the first one not kept
    assert f"experiment {names[0]}: kept from" in capsys.readouterr().out


def test_the_torch_picture_names_the_backend_and_draws_the_accumulation_detail(
        tiny: None) -> None:
    import matplotlib.pyplot as plt

    from nn.experiments import seeds
    from nn.plot import experiment_draw

    config = EXPERIMENTS["accumulation"].config.with_(steps=1)
    seeded = seeds.run_seeds("accumulation", [0], config=config, processes=1,
                             run=torch_backend.runner("accumulation"))
    fig = experiment_draw(seeded)
    try:
        assert "convolutions" in fig._suptitle.get_text()
        assert "[torch, cpu]" in fig._suptitle.get_text()
        assert len(fig.axes) == 2  # the replayed fp16 running sum of the first convolution
    finally:
        plt.close(fig)
