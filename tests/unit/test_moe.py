"""The mixture-of-experts model: published parameter counts of the presets (by analytics), the
real modules' counts, FLOPs against torch's operator-level count (FlopCounterMode) with the
counting convention (k routed experts per token, shared experts, the router), capacity drops
counted on a routing forced by the router's weights, the load-balancing loss in the training
loss, the load counters under recompute, the dispatch seam, and the config's refusals."""

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from accelbench.analytics.flops import (
    block_flops,
    dropped_flops,
    hardware_flops_per_token,
    model_flops_per_step,
    model_flops_per_token,
)
from accelbench.analytics.params import (
    active_params,
    expert_matmul_params,
    matmul_params,
    router_params,
    total_params,
)
from accelbench.config.errors import ConfigError
from accelbench.config.model import is_moe_layer, moe_layer_count
from accelbench.config.presets import get_preset, resolve_model
from accelbench.models.gpt import GPT, MLP, Block
from accelbench.models.moe import MoE, expert_load, moe_layers, set_dispatch
from accelbench.models.moe_routing import Routing, combine, local_dispatch, permute

# Hugging Face config.json arithmetic (safetensors totals of the released checkpoints)
PUBLISHED = {"mixtral-8x7b": 46_702_792_704, "mixtral-8x22b": 140_620_634_112,
             "deepseek-moe-16b": 16_375_728_128}
# active: Mixtral's "12.9B" (two of eight experts), DeepSeek-MoE's "2.8B" (its paper)
ACTIVE = {"mixtral-8x7b": 12_879_925_248, "deepseek-moe-16b": 2_828_650_496}
# moe-tiny, with first-dense and every-other layers, a shared gate, sigmoid gates, GELU experts
# with biases, and a model-wide d_ff that is not the experts' width
VARIANTS = [{}, {"moe_first_dense": 1, "n_layer": 3}, {"moe_every": 2, "n_layer": 4},
            {"moe_shared_gate": True}, {"moe_gate": "sigmoid", "moe_norm_topk": False},
            {"activation": "gelu", "bias": True, "n_shared_experts": 0},
            {"n_shared_experts": 2, "moe_top_k": 3, "tie_embeddings": True}]


def _tiny(**changes):
    """moe-tiny with a small vocabulary (the counts test the blocks, not the embedding)."""
    return get_preset("moe-tiny").with_changes(vocab_size=256, **changes)


def _count(fn) -> int:
    """FLOPs torch counts for fn, attention through the math backend (seen as matmuls)."""
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("name,count", PUBLISHED.items())
def test_published_parameter_counts(name, count):
    assert total_params(get_preset(name)) == count


@pytest.mark.parametrize("name,count", ACTIVE.items())
def test_active_parameters(name, count):
    assert active_params(get_preset(name)) == count


def test_mixtral_by_hand():
    """32 x (attention + 8 experts of 3 x 4096 x 14336 + router 4096 x 8 + 2 norms) + two
    32000 x 4096 embeddings + the final norm; active: 2 experts instead of 8."""
    attention = 4096 * (4096 + 2 * 1024) + 4096 * 4096
    expert = 3 * 4096 * 14336
    layer = attention + 8 * expert + 4096 * 8 + 2 * 4096
    total = 32 * layer + 2 * 32000 * 4096 + 4096
    cfg = get_preset("mixtral-8x7b")
    assert total_params(cfg) == total
    assert active_params(cfg) == total - 32 * 6 * expert


def test_deepseek_layers_first_dense():
    cfg = get_preset("deepseek-moe-16b")
    assert [is_moe_layer(cfg, i) for i in range(3)] == [False, True, True]
    assert moe_layer_count(cfg) == 27


@pytest.mark.parametrize("variant", VARIANTS)
def test_params_match_instantiated_model(variant):
    cfg = _tiny(**variant)
    model = GPT(cfg)
    assert model.num_params() == total_params(cfg)
    moe = moe_layers(model)
    assert len(moe) == moe_layer_count(cfg) > 0
    one_expert = (moe[0].experts.w_fc[0].numel() + moe[0].experts.w_proj[0].numel()
                  + (moe[0].experts.b_fc[0].numel() + moe[0].experts.b_proj[0].numel()
                     if cfg.bias else 0))
    unused = len(moe) * (cfg.n_experts - cfg.moe_top_k) * one_expert
    assert active_params(cfg) == total_params(cfg) - unused


def test_a_dense_layer_keeps_the_dense_width():
    model = GPT(_tiny(moe_first_dense=1, n_layer=2))
    assert isinstance(model.h[0].mlp, MLP) and model.h[0].mlp.c_proj.in_features == 384
    assert isinstance(model.h[1].mlp, MoE)
    assert model.h[1].mlp.experts.w_proj.shape == (8, 128, 128)


@pytest.mark.parametrize("variant", VARIANTS)
def test_model_flops_match_flop_counter(variant):
    """Dropless: every token runs exactly k routed experts, whatever the router chose, so
    torch's count of the real modules equals the model FLOPs (router, shared, k experts)."""
    cfg = _tiny(**variant)
    model = GPT(cfg)
    batch, seq = 2, 48
    idx = torch.randint(0, cfg.vocab_size, (batch, seq))
    out = {}
    fwd = _count(lambda: out.update(loss=model(idx, idx)[1]))
    bwd = _count(lambda: out["loss"].backward())
    expected = model_flops_per_step(cfg, seq, batch * seq)
    assert fwd == expected.forward
    assert bwd == expected.backward


@pytest.mark.parametrize("layer", [0, 1])
def test_block_flops_match_flop_counter(layer):
    """The block benchmark's count: Block(cfg, layer) dense (layer 0 here) or MoE."""
    cfg = _tiny(moe_first_dense=1, n_layer=2)
    block = Block(cfg, layer)
    x = torch.randn(2, 32, cfg.d_model, requires_grad=True)
    out = {}
    fwd = _count(lambda: out.update(y=block(x)))
    bwd = _count(lambda: out["y"].backward(torch.ones_like(out["y"])))
    expected = block_flops(cfg, 32, 2, layer)
    assert (fwd, bwd) == (expected.forward, expected.backward)


def test_moe_flops_convention_by_hand():
    """Forward per token of one MoE MLP: 2 x (router + k experts + shared experts)."""
    cfg = _tiny(moe_shared_gate=True)
    dense_head = cfg.vocab_size * cfg.d_model
    attention = cfg.d_model * (cfg.d_model + 2 * cfg.kv_dim) + cfg.d_model ** 2
    per_layer = attention + (cfg.d_model * 8 + cfg.d_model) + (2 + 1) * 3 * 128 * 128
    assert matmul_params(cfg) == 2 * per_layer + dense_head
    assert router_params(cfg) == 128 * 8 + 128
    assert expert_matmul_params(cfg) == 3 * 128 * 128


def test_full_recompute_reruns_the_whole_moe_block():
    """Hardware FLOPs: an expert's output is saved for its gate's gradient, so torch's
    early-stopping checkpoint reruns all of an MoE block; a dense block less its last matmul."""
    cfg = _tiny(moe_first_dense=1, n_layer=3)
    model = GPT(cfg)
    model.set_recompute("full")
    batch, seq = 2, 32
    idx = torch.randint(0, cfg.vocab_size, (batch, seq))
    total = _count(lambda: model(idx, idx)[1].backward())
    assert total == hardware_flops_per_token(cfg, seq, "full", early_stop=True) * batch * seq


def _forced_moe(capacity_factor: float) -> tuple[MoE, torch.Tensor]:
    """An MoE of 4 experts (top-2) whose router sends every token to experts 0 and 1: inputs
    are positive, router rows 0 and 1 positive (0 the larger), rows 2 and 3 negative."""
    cfg = _tiny(n_experts=4, n_shared_experts=1, capacity_factor=capacity_factor)
    moe = MoE(cfg)
    with torch.no_grad():
        moe.router.weight.copy_(torch.tensor([2.0, 1.0, -1.0, -2.0]).unsqueeze(1).expand(4, 128))
    x = (torch.rand(2, 10, 128) + 0.1).requires_grad_()
    return moe, x


def test_capacity_drops_are_counted_and_skipped():
    """20 tokens x top-2 over 4 experts at capacity factor 1: each expert takes ceil(1 x 20 x
    2 / 4) = 10; experts 0 and 1 are each chosen by all 20, so the last 10 tokens lose both."""
    moe, x = _forced_moe(1.0)
    assert moe.capacity(20) == 10
    y = moe(x)
    routed, dropped = expert_load(moe)
    assert routed == [[20, 20, 0, 0]] and dropped == [[10, 10, 0, 0]]
    flat = x.reshape(-1, 128)
    shared_only = moe.shared(flat[10:])
    torch.testing.assert_close(y.reshape(-1, 128)[10:], shared_only)
    assert not torch.allclose(y.reshape(-1, 128)[:10], moe.shared(flat[:10]))


def test_dropped_work_is_what_the_counter_misses():
    """The executed FLOPs are the model FLOPs less dropped_flops of the counted drops."""
    moe, x = _forced_moe(1.0)
    cfg = _tiny(n_experts=4, n_shared_experts=1)
    out = {}
    fwd = _count(lambda: out.update(y=moe(x)))
    bwd = _count(lambda: out["y"].sum().backward())
    dropped = sum(expert_load(moe)[1][0])
    per_token = 2 * (router_params(cfg) + 3 * expert_matmul_params(cfg))  # router, 2 + 1 shared
    assert fwd == 20 * per_token - dropped_flops(cfg, dropped).forward
    assert bwd == 2 * 20 * per_token - dropped_flops(cfg, dropped).backward


def test_dropless_drops_nothing():
    moe, x = _forced_moe(0.0)
    moe(x)
    assert expert_load(moe) == ([[20, 20, 0, 0]], [[0, 0, 0, 0]])
    assert moe.capacity(20) is None


def test_load_counts_once_under_full_recompute_and_resets():
    cfg = _tiny()
    model = GPT(cfg)
    model.set_recompute("full")
    idx = torch.randint(0, cfg.vocab_size, (2, 16))
    model(idx, idx)[1].backward()
    routed, dropped = expert_load(model)
    assert [sum(r) for r in routed] == [2 * 16 * cfg.moe_top_k] * 2
    assert dropped == [[0] * 8] * 2
    for m in moe_layers(model):
        m.reset_load()
    assert expert_load(model)[0] == [[0] * 8] * 2


def test_aux_loss_is_switch_form_and_in_the_training_loss():
    """E x sum_e f_e P_e per layer; the model adds coef x the layers' mean to cross-entropy."""
    cfg = _tiny(aux_loss_coef=0.5)
    model = GPT(cfg)
    idx = torch.randint(0, cfg.vocab_size, (2, 16))
    logits, loss = model(idx, idx)
    ce = torch.nn.functional.cross_entropy(logits.view(-1, cfg.vocab_size), idx.reshape(-1))
    layers = moe_layers(model)
    assert loss.item() == pytest.approx(
        ce.item() + 0.5 * sum(m.aux_loss.item() for m in layers) / len(layers), rel=1e-6)
    x = model.h[0].ln_2(model.h[0].attn(model.h[0].ln_1(model.embed(idx))) + model.embed(idx))
    scores = layers[0].scores(x.reshape(-1, cfg.d_model))
    chosen = torch.zeros(8).index_add_(0, scores.topk(2).indices.reshape(-1), torch.ones(64))
    expected = 8 * torch.sum(chosen / 32 * scores.mean(0))
    assert layers[0].aux_loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    assert model.h[0].mlp.router.weight.grad.abs().sum() > 0


def test_no_aux_loss_without_its_coefficient():
    cfg = _tiny(aux_loss_coef=0.0)
    model = GPT(cfg)
    idx = torch.randint(0, cfg.vocab_size, (1, 8))
    logits, loss = model(idx, idx)
    ce = torch.nn.functional.cross_entropy(logits.view(-1, cfg.vocab_size), idx.reshape(-1))
    assert loss.item() == ce.item()
    assert all(m.aux_loss is None for m in moe_layers(model))


@pytest.mark.parametrize("change", [{"n_experts": 0}, {"moe_first_dense": 2}])
def test_a_coefficient_without_moe_layers_trains_dense(change):
    """A config made dense in Python keeps its aux_loss_coef; no loss is added (on the command
    line such an override is refused: test_overrides_that_leave_no_moe_are_refused)."""
    cfg = get_preset("moe-tiny").with_changes(vocab_size=256, **change)
    assert cfg.aux_loss_coef > 0 and not cfg.is_moe
    model = GPT(cfg)
    idx = torch.randint(0, cfg.vocab_size, (1, 8))
    logits, loss = model(idx, idx)
    ce = torch.nn.functional.cross_entropy(logits.view(-1, cfg.vocab_size), idx.reshape(-1))
    assert loss.item() == ce.item() and not moe_layers(model)


def _split_dispatch(x: torch.Tensor, routing: Routing, experts) -> torch.Tensor:
    """What an expert-parallel dispatch does, in one process: two halves of the experts, each
    computing the rows of its own experts, then one combine."""
    rows, counts = permute(x, routing), routing.counts()
    half = len(counts) // 2
    first, second = (experts_copy(experts, lo, half) for lo in (0, half))
    n_first = sum(counts[:half])
    y = torch.cat((first(rows[:n_first], counts[:half]), second(rows[n_first:], counts[half:])))
    return combine(y, routing)


def experts_copy(experts, first: int, n: int):
    """A copy of `experts` sharded to [first, first + n) (the weights stay the same values)."""
    import copy
    part = copy.deepcopy(experts)
    part.shard(first, n)
    assert part.first_expert == first and part.n_local == n
    return part


def test_the_dispatch_seam_takes_a_sharded_dispatch():
    cfg = _tiny(capacity_factor=1.0)
    model = GPT(cfg).eval()
    idx = torch.randint(0, cfg.vocab_size, (2, 16))
    with torch.no_grad():
        expected = model(idx)
        set_dispatch(model, _split_dispatch)
        got = model(idx)
        set_dispatch(model, local_dispatch)
    torch.testing.assert_close(got, expected)
    assert all(m.dispatch is local_dispatch for m in moe_layers(model))


@pytest.mark.parametrize("change,field", [
    ({"moe_top_k": 9}, "model.moe_top_k"),
    ({"moe_top_k": 0}, "model.moe_top_k"),
    ({"moe_gate": "relu"}, "model.moe_gate"),
    ({"capacity_factor": -1.0}, "model.capacity_factor"),
    ({"capacity_factor": math.nan}, "model.capacity_factor"),
    ({"aux_loss_coef": math.inf}, "model.aux_loss_coef"),
    ({"n_experts": -2}, "model.n_experts"),
    ({"n_shared_experts": -1}, "model.n_shared_experts"),
    ({"moe_every": 0}, "model.moe_every"),
    ({"n_shared_experts": 0, "moe_shared_gate": True}, "model.moe_shared_gate"),
])
def test_bad_moe_fields_name_the_field(change, field):
    with pytest.raises(ConfigError) as err:
        get_preset("moe-tiny").with_changes(**change)
    assert err.value.field == field


def test_overrides_reach_the_moe_fields():
    cfg = resolve_model("moe-tiny:experts=4,top_k=1,capacity_factor=1.25,moe_gate=sigmoid")
    assert (cfg.n_experts, cfg.moe_top_k, cfg.capacity_factor, cfg.moe_gate) == (
        4, 1, 1.25, "sigmoid")
    assert total_params(get_preset("moe-tiny").with_changes(n_experts=0)) == total_params(
        get_preset("llama-tiny"))


@pytest.mark.parametrize("spec,start", [
    ("moe-tiny:experts=0,top_k=5", "model.n_experts: experts must be at least 1, got 0"),
    ("moe-tiny:experts=-1", "model.n_experts: experts must be at least 1, got -1"),
    ("moe-tiny:experts=2,top_k=3", "model.moe_top_k: 3 experts per token with 2 experts"),
    ("moe-tiny:top_k=0", "model.moe_top_k: 0 experts per token"),
    ("gpt2:top_k=2", "model.moe_top_k: moe_top_k given to gpt2, a dense model"),
    ("llama-tiny:capacity_factor=1.0", "model.capacity_factor: capacity_factor given to "
     "llama-tiny, a dense model"),
    ("moe-tiny:moe_first_dense=2", "model.moe_first_dense: no mixture-of-experts layer is left "
     "among 2 layers"),
    ("moe-tiny:layers=4,moe_every=5", "model.moe_every: no mixture-of-experts layer is left "
     "among 4 layers"),
])
def test_overrides_that_leave_no_moe_are_refused(spec, start):
    """An MoE override never yields a dense model silently: experts >= 1, top_k within them,
    MoE fields only with experts, at least one MoE layer left."""
    with pytest.raises(ConfigError) as err:
        resolve_model(spec)
    assert str(err.value).startswith(start)
    assert resolve_model("gpt2:experts=4,top_k=1").is_moe  # experts turn a dense preset MoE


def test_dense_models_count_as_before():
    """The MoE arithmetic leaves a dense model's counts alone (6N + 12LHQT, N all weights)."""
    cfg = get_preset("llama2-7b")
    assert active_params(cfg) == total_params(cfg)
    n = 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008) + 32000 * 4096
    assert model_flops_per_token(cfg, 4096).total == 6 * n + 12 * 32 * 4096 * 4096


def test_load_counters_stay_on_the_layers_device_during_the_step(monkeypatch):
    """Counting copies nothing to the host inside a forward (no sync in a timed step): the
    counters are tensors on the routing's device, read only by expert_load afterwards."""
    moe, x = _forced_moe(1.0)

    def no_host_copy(self, *args, **kwargs):
        raise AssertionError("a tensor was copied to the host inside the forward")

    with monkeypatch.context() as patched:
        patched.setattr(torch.Tensor, "cpu", no_host_copy)
        moe(x)
    assert moe.tokens_routed.device == x.device
    assert expert_load(moe) == ([[20, 20, 0, 0]], [[10, 10, 0, 0]])
