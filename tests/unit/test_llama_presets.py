"""Llama-family presets: published parameter counts matched exactly, Meta's SwiGLU width rule,
and the validation of the new switches."""

import pytest

from accelbench.analytics.params import total_params
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset, resolve_model
from accelbench.config.presets_llama import llama_ffn_dim

# from the model cards / Hugging Face configs (safetensors parameter totals)
PUBLISHED = {
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
}


@pytest.mark.parametrize("name,count", PUBLISHED.items())
def test_published_parameter_counts(name, count):
    assert total_params(get_preset(name)) == count


@pytest.mark.parametrize("d_model,multiple,multiplier,width", [
    (4096, 256, 1.0, 11008), (5120, 256, 1.0, 13824), (8192, 4096, 1.3, 28672),
    (4096, 1024, 1.3, 14336), (16384, 4096, 1.2, 53248)])
def test_meta_ffn_rounding_rule(d_model, multiple, multiplier, width):
    assert llama_ffn_dim(d_model, multiple, multiplier) == width


def test_llama31_carries_rope_scaling():
    cfg = get_preset("llama3.1-405b")
    assert (cfg.rope_scaling, cfg.rope_factor, cfg.rope_original_positions) == ("llama3", 8, 8192)
    assert (cfg.n_layer, cfg.kv_heads, cfg.rotary_base) == (126, 8, 500000.0)


def test_overrides_keep_the_llama_switches():
    cfg = resolve_model("llama3-8b:layers=2")
    assert (cfg.n_layer, cfg.activation, cfg.norm, cfg.kv_heads) == (2, "swiglu", "rmsnorm", 8)


def test_a_shrunk_llama_changes_its_kv_heads_and_vocabulary():
    """The docs/models.md shrink: layers alone leave the 128k-token embedding and head; with
    kv_heads, hidden, ffn and vocab it is small on every axis."""
    assert total_params(resolve_model("llama3-8b:layers=2")) == 1_486_901_248
    cfg = resolve_model("llama3-8b:layers=2,hidden=256,heads=4,kv_heads=2,ffn=768,vocab=8192")
    assert (cfg.n_layer, cfg.n_head, cfg.kv_heads, cfg.vocab_size) == (2, 4, 2, 8192)
    assert (cfg.activation, cfg.norm, cfg.rotary_base) == ("swiglu", "rmsnorm", 500000.0)
    assert total_params(cfg) == 5_768_448
    assert resolve_model("gpt2:kv_heads=4").kv_heads == 4  # grouped-query GPT-2


@pytest.mark.parametrize("spec,start", [
    ("llama3-8b:layers=2,hidden=256,heads=4,kv_heads=3", "model.n_kv_head: 3 key/value heads "
     "do not divide 4 heads"),
    ("llama3-8b:kv_heads=0", "model.n_kv_head: kv_heads must be at least 1, got 0"),
    ("llama3-8b:kv_heads=-2", "model.n_kv_head: kv_heads must be at least 1, got -2"),
    ("llama3-8b:heads=4,hidden=256", "model.n_kv_head: 8 key/value heads do not divide 4"),
])
def test_bad_kv_heads_overrides_are_refused(spec, start):
    with pytest.raises(ConfigError) as err:
        resolve_model(spec)
    assert str(err.value).startswith(start)


@pytest.mark.parametrize("change,field", [
    ({"rope_scaling": "yarn"}, "model.rope_scaling"),
    ({"rope_scaling": "llama3", "rope_high_freq_factor": 0.5}, "model.rope_high_freq_factor"),
    ({"rope_scaling": "llama3", "rope_factor": 0.0}, "model.rope_factor"),
    ({"n_kv_head": 3}, "model.n_kv_head"),
])
def test_bad_llama_switches_name_the_field(change, field):
    with pytest.raises(ConfigError) as err:
        get_preset("llama-tiny").with_changes(**change)
    assert err.value.field == field


def test_rope_scaling_needs_rotary():
    with pytest.raises(ConfigError, match="rope_scaling"):
        get_preset("gpt2-tiny").with_changes(rope_scaling="llama3")
