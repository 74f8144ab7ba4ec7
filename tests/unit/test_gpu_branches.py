"""Device-specific branches that a CPU can still test, with torch.cuda's functions (and
nothing else) stood in for: the selected cuda:N is made current (CUDA events record on the
current device), bf16 support is asked about the device passed without emulation, 2:4 layers
return row-major (B,T,N) outputs whatever layout the sparse kernel gives, the 2:4 label is the
backend torch.sparse picks, NVML finds its GPU by UUID, and NCCL gets its device_id."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F

from accelbench.bench import dtypes
from accelbench.hardware import device as devices
from accelbench.hardware.energy import nvml
from accelbench.models import semi_structured
from accelbench.models.semi_structured import TwoFourLinear
from accelbench.parallel import dist as dist_mod


def _fake_cuda(monkeypatch, count: int = 2) -> list:
    """torch.cuda says it has `count` GPUs; the devices set current are collected."""
    current: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    return current


def test_selecting_cuda_n_makes_it_the_current_device(monkeypatch):
    current = _fake_cuda(monkeypatch)
    assert devices.select("cuda:1") == torch.device("cuda", 1)
    assert current == [torch.device("cuda", 1)]


def test_selecting_plain_cuda_leaves_the_current_device(monkeypatch):
    current = _fake_cuda(monkeypatch)
    assert devices.select("cuda") == torch.device("cuda")
    assert current == []


def test_an_index_past_the_devices_is_refused_before_anything_is_set(monkeypatch):
    current = _fake_cuda(monkeypatch)
    with pytest.raises(Exception, match="names device 2 but there are 2"):
        devices.select("cuda:2")
    assert current == []


def _fake_bf16(monkeypatch, capability_major: int) -> list:
    """is_bf16_supported answers for the device made current by torch.cuda.device."""
    asked: list = []
    state = {"current": 0}

    @contextmanager
    def device(d):
        before, state["current"] = state["current"], torch.device(d).index
        try:
            yield
        finally:
            state["current"] = before

    def is_bf16_supported(including_emulation: bool = True):
        asked.append((state["current"], including_emulation))
        return capability_major >= 8 or including_emulation  # a V100 emulates bf16

    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (capability_major, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    return asked


def test_bf16_is_refused_where_it_is_only_emulated_and_asked_of_the_device_passed(monkeypatch):
    asked = _fake_bf16(monkeypatch, 7)
    reason = dtypes.dtype_support(torch.device("cuda", 1), "bf16")
    assert reason == "bf16 needs compute capability 8.0+, this GPU has (7, 0)"
    assert asked == [(1, False)]


def test_bf16_runs_on_bf16_units(monkeypatch):
    asked = _fake_bf16(monkeypatch, 9)
    assert dtypes.dtype_support(torch.device("cuda", 3), "bf16") is None
    assert asked == [(3, False)]


def test_an_older_torch_without_including_emulation_uses_the_capability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)  # counts emulation
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    assert not dtypes.cuda_bf16_native(torch.device("cuda", 0))


class _ColumnMajorLinear(torch.Tensor):
    """A compressed weight whose F.linear returns what cuSPARSELt returns without
    _FUSE_TRANSPOSE: the (B*T, N) product computed transposed, viewed as (B,T,N)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.linear:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        x, w = args[0], args[1].as_subclass(torch.Tensor)
        bias = args[2] if len(args) > 2 else kwargs.get("bias")
        x2 = x.reshape(-1, x.shape[-1])
        out_t = w @ x2.t()  # (N, B*T), row-major: its transpose is column-major
        if bias is not None:
            out_t = out_t + bias[:, None]
        return out_t.t().view(*x.shape[:-1], w.shape[0])


def _column_major(weight: torch.Tensor) -> torch.Tensor:
    return weight.as_subclass(_ColumnMajorLinear)


def test_a_two_four_layer_returns_row_major_output_and_input_gradient():
    gen = torch.Generator().manual_seed(0)
    batch, seq, n_in, n_out = 2, 3, 8, 12
    w = torch.randn(n_out, n_in, generator=gen, requires_grad=True)
    b = torch.randn(n_out, generator=gen, requires_grad=True)
    x = torch.randn(batch, seq, n_in, generator=gen, requires_grad=True)
    raw = F.linear(x, _column_major(w.detach()), b.detach())
    assert raw.stride() == (seq, 1, batch * seq)  # the layout the kernel hands back
    y = TwoFourLinear.apply(x, w, b, _column_major)
    assert y.shape == (batch, seq, n_out)
    assert y.stride() == (seq * n_out, n_out, 1) and y.is_contiguous()
    torch.testing.assert_close(y, F.linear(x, w, b))
    (grad_x,) = torch.autograd.grad(y, (x,), torch.ones_like(y))
    assert grad_x.stride() == (seq * n_in, n_in, 1)


@pytest.mark.parametrize("forced, label", [(False, "cusparselt"), (True, "cutlass")])
def test_the_two_four_label_is_the_backend_torch_sparse_picks(monkeypatch, forced, label):
    monkeypatch.setattr(torch.sparse.SparseSemiStructuredTensor, "_FORCE_CUTLASS", forced)
    monkeypatch.setattr(torch.backends.cusparselt, "is_available", lambda: False)
    assert semi_structured.kernel_backend() == label
    assert f"({label})" in semi_structured.kernel_label()


def test_a_torch_without_cusparselt_is_a_reason_not_a_wrong_label(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    monkeypatch.setattr(torch.backends.cusparselt, "is_available", lambda: False)
    problem = semi_structured.device_problem(torch.device("cuda", 0), "bf16")
    assert problem and "built without cuSPARSELt" in problem


class _FakeNvml:
    """pynvml with two GPUs of which the first refuses to be queried."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.by_uuid: list[str] = []

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802 - pynvml's name
        raise self.NVMLError("NoPermission: GPU 0 is not this process's")

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        self.by_uuid.append(uuid)
        if uuid != "GPU-abcd":
            raise self.NVMLError("NotFound")
        return "handle-1"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        return 5000

    def nvmlShutdown(self):  # noqa: N802
        pass


def test_nvml_opens_its_gpu_by_uuid_and_no_other():
    fake = _FakeNvml()
    assert nvml.nvml_handle(fake, "GPU-ABCD") == "handle-1"
    source = nvml.NvmlSource(fake, nvml.nvml_handle(fake, "abcd"), "abcd")
    assert fake.by_uuid == ["GPU-abcd", "GPU-abcd"]
    assert source.devices == ("GPU-abcd",) and source.read_j() == (0.0,)


def test_nccl_is_initialised_with_the_ranks_device():
    cuda1 = torch.device("cuda", 1)
    assert dist_mod.init_kwargs("nccl", cuda1) == {"device_id": cuda1}
    assert dist_mod.init_kwargs("gloo", torch.device("cpu")) == {}
    assert dist_mod.init_kwargs("nccl", torch.device("cuda")) == {}  # no index: none to bind


def test_an_older_torch_without_device_id_gets_none(monkeypatch):
    monkeypatch.setattr(dist_mod.dist, "init_process_group", lambda backend=None: None)
    assert dist_mod.init_kwargs("nccl", torch.device("cuda", 0)) == {}


def test_memory_order_names_a_transposed_output_column_major() -> None:
    """The H200's 2:4 output, strides (64, 1, 128), is column-major: the check says so."""
    from accelbench.bench.kernel_probes import memory_order

    assert memory_order(torch.empty_strided((2, 64, 128), (64, 1, 128))) == "column-major"
    assert memory_order(torch.zeros(2, 64, 128)) == "row-major"
    assert memory_order(torch.zeros(4, 6)[:, :3]) == "neither row- nor column-major"
