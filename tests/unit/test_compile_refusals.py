"""A layout that cannot compile is refused in one line before anything runs (issue 37.3): under
torch 2.13 a sequence-parallel block fails inside Dynamo (DTensor's sharding propagation of the
sequence-sharded layer norm), measured in tests/dist/compile_worker.py's inductor run."""

import pytest

from accelbench.bench.train.spec import TrainSpec, validate_train_spec
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset


def _spec(layout: str, compile: bool = True) -> TrainSpec:
    return TrainSpec(get_preset("gpt2-tiny"), seq_lens=(32,), micro_batches=(2,),
                     dtypes=("fp32",), steps=3, warmup_steps=1, device="cpu", compile=compile,
                     layout=layout, nproc=2)


def test_compile_with_sequence_parallel_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        validate_train_spec(_spec("tp=2,sp=1"))
    assert str(err.value).startswith("compile:") and "\n" not in str(err.value)


@pytest.mark.parametrize("layout", ["tp=2", "dp=2,zero=3"])
def test_compile_elsewhere_and_sp_without_compile_pass(layout):
    validate_train_spec(_spec(layout))
    validate_train_spec(_spec("tp=2,sp=1", compile=False))
