"""nn's layout targets, read from its import graph (tests/nn/import_graph.py):

- at most 12 modules at nn's top level;
- no import cycle between modules (imports under ``TYPE_CHECKING`` aside; an import inside a
  function is an arrow too);
- the engine imports nothing from layers, models, training, saving, precision or a face;
- at most 5 imports of nn modules inside functions, each listed here with its reason;
- ``nn/__init__.py`` is a grouped list of imports with no E402 escape;
- every public import path that the README, the notebooks and scripts use keeps working.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from import_graph import read

import nn

ROOT = Path(nn.__file__).parent
GRAPH = read(ROOT)

# (module, imported module): why the import waits for the function call
FUNCTION_IMPORTS = {
    ("nn.cli", "nn.plot"): "matplotlib loads only for the commands that draw",
}


def test_the_planted_cycle_is_found_and_a_type_checking_import_is_no_arrow(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from pkg import a\n")
    graph = read(pkg)
    assert graph.cycles() == [["pkg.a", "pkg.b"]]
    assert graph.function_imports == [("pkg.b", 2, "pkg.a")]
    assert graph.arrows["pkg.c"] == set()


def test_at_most_12_modules_at_the_top_level():
    assert len(GRAPH.top_level) <= 12, GRAPH.top_level


def test_no_import_cycle_between_modules():
    assert GRAPH.cycles() == []


def test_the_engine_imports_nothing_from_above_it():
    above = ("nn.layers", "nn.models", "nn.training", "nn.saving", "nn.faces", "nn.precision",
             "nn.optimizers", "nn.experiments", "nn.datasets")
    upward = {(m, t) for m, arrows in GRAPH.arrows.items() if m.startswith("nn.engine")
              for t in arrows if t.startswith(above)}
    assert upward == set()


def test_function_level_imports_are_few_and_each_has_a_reason():
    found = {(m, t) for m, _, t in GRAPH.function_imports}
    assert len(GRAPH.function_imports) <= 5
    assert found <= set(FUNCTION_IMPORTS), found - set(FUNCTION_IMPORTS)


def test_the_package_init_is_a_grouped_import_list_without_e402():
    text = (ROOT / "__init__.py").read_text()
    assert "E402" not in text
    assert text.count("# ---") >= 4  # grouped


PUBLIC_MODULES = [
    "nn", "nn.layers", "nn.losses", "nn.metrics", "nn.functions", "nn.datasets", "nn.fp8",
    "nn.optimizers", "nn.utils", "nn.plot", "nn.experiments", "nn.experiments.masters",
    "nn.experiments.stories", "nn.experiments.lm", "nn.experiments_fp8", "nn.warmup", "nn.cli",
    "nn.precision.mixed_precision",
]
PUBLIC_NAMES = [
    "mixed_precision", "registry", "dtypes", "layers", "losses", "functions", "datasets", "fp8",
    "optimizers", "metrics", "utils", "Model", "Sequential", "Dense", "Tensor", "Variable",
    "Policy", "autocast", "GradScaler", "LossScaleOptimizer", "DynamicLossScale", "load_model",
    "History", "GradientTape", "CrossEntropyLoss", "MSELoss", "fp8_autocast", "Layer", "Input",
]


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_a_public_module_path_imports(module):
    assert importlib.import_module(module) is not None


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_a_public_name_is_on_nn(name):
    assert hasattr(nn, name) and name in nn.__all__


def test_the_readmes_and_notebooks_spellings_work():
    from nn import experiments as ex  # noqa: F401
    from nn import layers, mixed_precision  # noqa: F401
    from nn.experiments import lm  # noqa: F401
    from nn.experiments.masters import MASTER_DEFAULT, master_weights  # noqa: F401
    from nn.experiments.stories import forward_events  # noqa: F401
    from nn.fp8 import ScalingState  # noqa: F401
    from nn.functions import cast  # noqa: F401
    from nn.losses import SparseCategoricalCrossentropy  # noqa: F401
    from nn.warmup import warmup  # noqa: F401

    assert nn.registry.OPTIMIZERS.register is not None  # README: @nn.registry.OPTIMIZERS...
    assert mixed_precision.set_global_policy is nn.set_global_policy
