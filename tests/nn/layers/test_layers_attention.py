"""MultiHeadAttention (Keras weight layout, causal mask, precision rule), Embedding (exact
sparse gradient) and Add, against references written from the definitions and float64
central differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layer_gradcheck import check_layer_gradients

import nn
from nn import layers
from nn.functions.attention import narrow_softmax

FEW = settings(max_examples=6, deadline=None)


def f64(x: np.ndarray) -> nn.Tensor:
    return nn.Tensor(x, fmt="float64")


def reference_mha(weights: list[np.ndarray], q: np.ndarray, v: np.ndarray, k: np.ndarray,
                  causal: bool) -> np.ndarray:
    """Keras's MultiHeadAttention written with einsum from its documented layout."""
    wq, bq, wk, bk, wv, bv, wo, bo = weights
    query = np.einsum("btd,dhk->bthk", q, wq) + bq
    key = np.einsum("bsd,dhk->bshk", k, wk) + bk
    value = np.einsum("bsd,dhk->bshk", v, wv) + bv
    query = query / np.sqrt(wq.shape[-1])
    scores = np.einsum("bthk,bshk->bhts", query, key)
    if causal:
        t, s = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((t, s), bool)), scores, -np.inf)  # j <= i
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhts,bshk->bthk", p, value)
    return np.einsum("bthk,hkd->btd", ctx, wo) + bo


def test_mha_weights_follow_keras_layout_and_order():
    mha = layers.MultiHeadAttention(num_heads=3, key_dim=4, name="mha")
    mha(np.zeros((2, 5, 6), np.float32), np.zeros((2, 7, 8), np.float32))
    assert [w.shape for w in mha.get_weights()] == [
        (6, 3, 4), (3, 4), (8, 3, 4), (3, 4), (8, 3, 4), (3, 4), (3, 4, 6), (6,)]
    assert [v.name.split("/")[1] for v in mha.weights] == [
        "query_kernel", "query_bias", "key_kernel", "key_bias", "value_kernel", "value_bias",
        "attention_output_kernel", "attention_output_bias"]


@pytest.mark.parametrize("causal", [False, True])
def test_mha_equals_the_reference_with_scale_one_over_sqrt_key_dim(causal):
    rng = np.random.default_rng(0)
    q, v, k = (rng.standard_normal(s) for s in ((2, 4, 6), (2, 5, 3), (2, 5, 2)))
    mha = layers.MultiHeadAttention(2, 3, dtype="float64", bias_initializer="he_uniform")
    y = mha(f64(q), f64(v), key=f64(k), use_causal_mask=causal).data
    np.testing.assert_allclose(y, reference_mha(mha.get_weights(), q, v, k, causal), rtol=1e-10,
                               atol=1e-12)


def test_key_defaults_to_value():
    rng = np.random.default_rng(1)
    q, v = rng.standard_normal((1, 3, 4)), rng.standard_normal((1, 3, 4))
    mha = layers.MultiHeadAttention(2, 2, dtype="float64")
    np.testing.assert_array_equal(mha(f64(q), f64(v)).data, mha(f64(q), f64(v), f64(v)).data)


def test_causal_mask_makes_each_position_blind_to_later_ones():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 4)).astype(np.float32)
    mha = layers.MultiHeadAttention(2, 2)
    y, probs = mha(x, x, use_causal_mask=True, return_attention_scores=True)
    changed = x.copy()
    changed[:, 4:] += 10.0
    y2 = mha(changed, changed, use_causal_mask=True)
    np.testing.assert_array_equal(y.data[:, :4], y2.data[:, :4])
    assert np.all(probs.data[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)
    np.testing.assert_allclose(probs.data.sum(-1), 1.0, rtol=1e-6)


@st.composite
def mha_cases(draw: st.DrawFn) -> dict:
    return {"heads": draw(st.integers(1, 2)), "key_dim": draw(st.integers(1, 3)),
            "t": draw(st.integers(1, 4)), "s": draw(st.integers(1, 4)),
            "d": draw(st.integers(1, 3)), "causal": draw(st.booleans()),
            "seed": draw(st.integers(0, 2**16))}


@FEW
@given(mha_cases())
def test_mha_gradients_match_central_differences(case):
    rng = np.random.default_rng(case["seed"])
    q = rng.standard_normal((2, case["t"], case["d"]))
    v = rng.standard_normal((2, case["s"], case["d"] + 1))
    mha = layers.MultiHeadAttention(case["heads"], case["key_dim"], dtype="float64",
                                    bias_initializer="he_uniform")

    def call(a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        return mha(a, b, use_causal_mask=case["causal"])

    call(f64(q), f64(v))
    check_layer_gradients(call, [q, v], mha.trainable_variables, seed=case["seed"])


def test_attention_mask_blocks_the_masked_keys():
    rng = np.random.default_rng(3)
    q, v = rng.standard_normal((1, 2, 4)), rng.standard_normal((1, 3, 4))
    mask = np.array([[[1, 1, 0], [1, 0, 0]]], bool)
    mha = layers.MultiHeadAttention(1, 2, dtype="float64")
    _, probs = mha(f64(q), f64(v), attention_mask=mask, return_attention_scores=True)
    assert np.all(probs.data[0, 0][~mask[0]] == 0)


def test_attention_softmax_runs_in_fp32_under_mixed_and_in_fp16_under_pure_float16():
    x = np.random.default_rng(4).standard_normal((1, 4, 8)).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        y, probs = layers.MultiHeadAttention(2, 4)(x, x, return_attention_scores=True)
    assert (y.fmt.name, probs.fmt.name) == ("float16", "float32")
    with nn.policy_scope("float16"):
        y, probs = layers.MultiHeadAttention(2, 4)(x, x, return_attention_scores=True)
    assert (y.fmt.name, probs.fmt.name) == ("float16", "float16")


@pytest.mark.parametrize("make,needle", [
    (lambda: layers.MultiHeadAttention(0, 4), "num_heads"),
    (lambda: layers.MultiHeadAttention(2, -1), "key_dim"),
    (lambda: layers.MultiHeadAttention(2, 4, dropout=0.1), "Dropout"),
    (lambda: layers.MultiHeadAttention(2, 4, accumulator="nope"), "accumulator"),
    (lambda: layers.Embedding(0, 4), "input_dim"),
    (lambda: layers.Embedding(10, 4, mask_zero=True), "mask_zero"),
])
def test_bad_arguments_raise_naming_the_argument(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_mha_bad_calls_raise_naming_the_layer_and_shapes():
    mha = layers.MultiHeadAttention(2, 2, name="att")
    x = np.zeros((1, 3, 4), np.float32)
    mha(x, x)
    with pytest.raises(ValueError, match=r"'att'.*query.*4\).*\(1, 3, 5\)"):
        mha(np.zeros((1, 3, 5), np.float32), x)
    with pytest.raises(ValueError, match=r"attention_mask.*\(batch, 3, 3\)"):
        mha(x, x, attention_mask=np.ones((1, 2, 3), bool))


def test_embedding_looks_up_rows_and_accepts_whole_floats_as_keras_does():
    emb = layers.Embedding(5, 3)
    idx = np.array([[4, 0, 4]])
    y = emb(idx)
    table = emb.get_weights()[0]
    np.testing.assert_array_equal(y.data, table[idx])
    np.testing.assert_array_equal(emb(idx.astype(np.float32)).data, y.data)
    with pytest.raises(ValueError, match=r"indices must be whole numbers in \[0, 5\), got 5"):
        emb(np.array([[5]]))
    for bad in (1.5, np.nan, np.inf):
        with pytest.raises(ValueError, match="whole numbers"):
            emb(np.array([[bad]]))
    with pytest.raises(TypeError, match="integers"):
        emb(np.array([["a"]]))


def test_embedding_sums_repeated_indices_in_fp32_before_one_rounding():
    # eight gradients of 2^-11 onto a row whose gradient is 1: adding them one by one in fp16
    # rounds each back to 1 (ties to even); summing in fp32 first gives 1 + 2^-8 exactly
    with nn.policy_scope("mixed_float16"):
        emb = layers.Embedding(3, 2)
        y = emb(np.zeros((1, 9), np.int64))
    g = np.full((1, 9, 2), 2.0**-11, np.float32)
    g[0, 0] = 1.0
    y.backward(g)
    assert emb.embeddings.grad is not None
    np.testing.assert_array_equal(emb.embeddings.grad.data[0], [1 + 2**-8, 1 + 2**-8])
    np.testing.assert_array_equal(emb.embeddings.grad.data[1:], 0)


def test_embedding_gradient_matches_central_differences():
    emb = layers.Embedding(4, 3, dtype="float64")
    idx = np.array([[0, 2, 2], [3, 0, 2]])
    emb(idx)
    check_layer_gradients(lambda: emb(idx), [], emb.trainable_variables)


def test_add_sums_a_list_and_its_gradients_match():
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal((2, 3)) for _ in range(3))
    add = layers.Add(dtype="float64")
    np.testing.assert_array_equal(add([f64(a), f64(b), f64(c)]).data, a + b + c)
    check_layer_gradients(lambda *t: add(list(t)), [a, b, c])


def test_add_needs_a_list_of_equal_shapes():
    add = layers.Add(name="plus")
    with pytest.raises(ValueError, match=r"'plus'.*list of at least 2"):
        add(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"'plus'.*\[\(2, 3\), \(2, 4\)\]"):
        add([np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)])


def test_fp16_softmax_rounds_every_step_to_fp16_as_a_numpy_float16_softmax_does():
    x = (np.random.default_rng(9).standard_normal((4, 9)) * 6).astype(np.float16)
    p = narrow_softmax(nn.Tensor(x.astype(np.float32), fmt="float16"))
    # numpy float16 arithmetic: each op computed in float32 and rounded once to float16
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    ref = e / e.astype(np.float32).sum(axis=-1, keepdims=True).astype(np.float16)
    np.testing.assert_array_equal(p.data, ref.astype(np.float32))


def test_fp32_softmax_is_used_for_formats_that_hold_fp32():
    x = nn.Tensor(np.random.default_rng(10).standard_normal((2, 5)))
    np.testing.assert_array_equal(narrow_softmax(x).data, nn.functions.softmax(x).data)


def test_mha_with_an_accumulator_option_has_the_same_gradients():
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 3, 4))
    mha = layers.MultiHeadAttention(2, 2, accumulator="float16", dtype="float64")

    def call(a: nn.Tensor) -> nn.Tensor:
        return mha(a, a, use_causal_mask=True)

    call(f64(q))
    check_layer_gradients(call, [q], mha.trainable_variables)


def test_fp16_accumulation_in_attention_changes_the_mixed_float16_result():
    x = np.random.default_rng(12).standard_normal((1, 64, 256)).astype(np.float32) * 4
    with nn.policy_scope("mixed_float16"):
        narrow = layers.MultiHeadAttention(1, 256, accumulator="float16", seed=1)
        wide = layers.MultiHeadAttention(1, 256, seed=1)
        y16, y32 = narrow(x, x), wide(x, x)
    assert np.all(np.isfinite(y16.data)) and not np.array_equal(y16.data, y32.data)
