"""The MoE load-balancing loss's gradient path (models/moe.py): AuxLossAutoScaler is the
identity forward and adds weight x scale into the aux loss in backward; the loss's probe sets
the scale to the gradient the loss receives; through both, one process's gradients equal those
of cross-entropy + coef x mean(aux) backpropagated as one tensor, at any loss scaling and
under full recompute; and the aux loss does change the router's gradient."""

import subprocess
import sys

import pytest
import torch

from accelbench.config.presets import get_preset
from accelbench.models.aux_loss import (
    AuxLossAutoScaler,
    AuxLossGradScale,
    scale_aux_loss,
    with_aux_term,
)
from accelbench.models.gpt import GPT
from accelbench.models.moe import aux_loss_of, set_aux_grad_scale

CFG = get_preset("moe-tiny").with_changes(vocab_size=256, n_positions=32, aux_loss_coef=0.3)


def test_forward_is_the_identity_and_backward_adds_weight_times_scale():
    """d(out)/d(output) passes through unchanged; d/d(aux) = weight x scale.value, read when the
    backward runs (set after the forward here)."""
    output = torch.randn(5, 3, requires_grad=True)
    aux_in = torch.randn(4, requires_grad=True)
    aux = (aux_in ** 2).sum()  # d(aux)/d(aux_in) = 2 aux_in
    scale = AuxLossGradScale()
    out = AuxLossAutoScaler.apply(output, aux, 0.25, scale)
    assert torch.equal(out, output)
    scale.value = 3.0
    upstream = torch.randn(5, 3)
    (out * upstream).sum().backward()
    torch.testing.assert_close(output.grad, upstream, rtol=0, atol=0)
    torch.testing.assert_close(aux_in.grad, 0.25 * 3.0 * 2 * aux_in.detach())


def test_a_zero_scale_adds_nothing_and_a_tensor_scale_works():
    """Scale 0 (a backward of logits alone) gives the aux loss no gradient; the scale the probe
    records is a tensor on the loss's device, without a host sync."""
    aux_in = torch.tensor([2.0], requires_grad=True)
    scale = AuxLossGradScale()
    scale_aux_loss(torch.ones(2, requires_grad=True), aux_in.sum() * 5, 1.0, scale).sum().backward()
    assert aux_in.grad.item() == 0.0
    aux_in.grad = None
    scale.value = torch.tensor(0.5)
    scale_aux_loss(torch.ones(2, requires_grad=True), aux_in.sum() * 5, 2.0, scale).sum().backward()
    assert aux_in.grad.item() == pytest.approx(5.0)


def test_the_probe_records_the_gradient_the_loss_receives():
    """loss + the aux term as the value; in backward the scale becomes d(objective)/d(loss)."""
    loss = torch.tensor(2.0, requires_grad=True)
    scale = AuxLossGradScale()
    total = with_aux_term(loss, torch.tensor(0.5, requires_grad=True), scale)
    assert total.item() == 2.5 and not isinstance(scale.value, torch.Tensor)
    (total * 0.125).backward()
    assert float(scale.value) == 0.125 and loss.grad.item() == 0.125


def _grads(model: GPT) -> dict[str, torch.Tensor]:
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_one_process_gradients_equal_the_loss_as_one_tensor(recompute):
    """(loss / 4).backward() through the scaler equals (cross-entropy + coef x mean of the
    layers' aux losses) / 4 backpropagated as one tensor (the aux losses in the graph)."""
    torch.manual_seed(0)
    model = GPT(CFG)
    model.set_recompute(recompute)
    idx = torch.randint(0, CFG.vocab_size, (2, 16))
    _, loss = model(idx, idx)
    (loss / 4).backward()
    ours = _grads(model)
    logits = model(idx)  # no targets: the scale is 0, the scalers add nothing
    ce = torch.nn.functional.cross_entropy(logits.view(-1, CFG.vocab_size), idx.reshape(-1))
    whole = ce + CFG.aux_loss_coef * aux_loss_of(model.h)
    assert whole.item() == pytest.approx(loss.item(), rel=1e-6)
    (whole / 4).backward()
    reference = _grads(model)
    assert ours.keys() == reference.keys()
    for name, grad in reference.items():
        torch.testing.assert_close(ours[name], grad, rtol=1e-5, atol=1e-9, msg=name)


def test_the_aux_loss_changes_the_router_gradient():
    """The same model and tokens without the aux loss: the router's gradient differs by far
    more than the tolerances the layouts are held to (so a lost aux gradient shows)."""
    torch.manual_seed(0)
    model = GPT(CFG)
    idx = torch.randint(0, CFG.vocab_size, (2, 16))
    model(idx, idx)[1].backward()
    with_aux = model.h[0].mlp.router.weight.grad.clone()
    model.zero_grad(set_to_none=True)
    logits = model(idx)
    torch.nn.functional.cross_entropy(logits.view(-1, CFG.vocab_size), idx.reshape(-1)).backward()
    without = model.h[0].mlp.router.weight.grad
    assert (with_aux - without).norm() / without.norm() > 1e-2


def test_a_pipeline_stage_sets_a_fixed_scale():
    """set_aux_grad_scale gives every MoE layer's shared scale a value (1 / micro-batches)."""
    model = GPT(CFG)
    set_aux_grad_scale([model.h[1]], 0.5)
    assert all(b.mlp.aux_grad_scale.value == 0.5 for b in model.h)
    assert model.h[0].mlp.aux_grad_scale is model.aux_grad_scale


def test_under_compile_the_scaler_runs_eagerly_and_records_the_loss_s_gradient():
    """scale_aux_loss and with_aux_term are Dynamo-disabled (torch._disable_dynamo: disabled
    when first called, so importing the models does not import Dynamo): a compiled caller
    breaks its graph at each and their backward still reads and sets the scale."""
    def objective(output, aux, loss, scale):
        scaled = scale_aux_loss(output, aux, 0.5, scale).sum() + loss
        return with_aux_term(scaled, aux, scale) * 0.25

    explained = torch._dynamo.explain(objective)(torch.ones(3), torch.tensor(1.0),
                                                 torch.tensor(2.0), AuxLossGradScale())
    assert explained.graph_break_count >= 1
    compiled = torch.compile(objective, backend="eager")
    aux_in = torch.tensor([2.0], requires_grad=True)
    loss = torch.tensor(1.5, requires_grad=True)
    scale = AuxLossGradScale()
    out = compiled(torch.ones(3, requires_grad=True), aux_in.sum() * 4, loss, scale)
    out.backward()
    assert float(scale.value) == 0.25 and loss.grad.item() == 0.25
    assert aux_in.grad.item() == pytest.approx(0.5 * 0.25 * 4)  # weight x scale x d(aux)


def test_importing_the_training_runtime_does_not_import_dynamo():
    """Dynamo costs about a second of CPU in every process that imports it (each rank of each
    launch, each command a test starts): the models and the training sweep leave it to --compile
    and the pipeline (parallel/pipeline.py), which import it when they run."""
    code = ("import sys, accelbench.bench.train.sweep, accelbench.workloads.block.runner; "
            "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]
