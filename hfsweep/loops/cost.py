"""What a trial's training costs, measured on every worker of both loops and added to every report
(the names are `hfsweep.contract.metrics`'s): training throughput, trainable parameters, and on a GPU of a
known peak an estimate of model FLOPs utilisation. Peak memory is `WhatRan`'s."""

from __future__ import annotations

import time

from hfsweep.contract.metrics import MFU, SAMPLES_PER_SECOND, TOKENS_PER_SECOND, TRAINABLE_PARAMS

# Dense bf16 tensor-core peaks in FLOP/s, by a part of the device's name; the first match wins,
# so a more specific name comes before one it contains ("H100 PCIe" before "H100", "L40S" before "L4").
BF16_PEAK_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),  # SXM ("NVIDIA H100 80GB HBM3")
    ("H200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("L40", 181e12),
    ("L4", 121e12),
)


def peak_flops(device_name: str) -> float | None:
    return next((flops for name, flops in BF16_PEAK_FLOPS if name in device_name), None)


class Cost:
    """Counts what the model trains on, through a forward pre-hook on the model: it sees every
    training batch as the model gets it, in both loops and inside any wrapper (DDP, FSDP and
    DeepSpeed call the model), and skips evaluation (the model is in eval mode then). Tokens are
    counted by the Task (`tokens_in_batch`), as its prepared data counts them. The clock starts
    where the loop's reported start-up (`startup_s`) ends, so throughput x (Tune's time_total_s -
    startup_s) is what the run trained on; evaluation, saving and waiting for data count in, as
    part of what training costs.

    MFU is an estimate: 6 x parameters x tokens per second (forward and backward of a dense
    model, attention left out) over the device's dense bf16 peak, whatever precision ran."""

    def __init__(self, model, task):
        self.task = task
        self.params = sum(p.numel() for p in model.parameters())
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.samples, self.tokens, self.started, self.device = 0, 0, time.perf_counter(), None
        model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs) -> None:
        if not module.training:
            return
        import torch

        first = next(value for value in (*args, *kwargs.values()) if torch.is_tensor(value))
        self.device = first.device
        self.samples += len(first)
        if self.task.counts_tokens:
            self.tokens += self.task.tokens_in_batch(kwargs)  # a tensor on the device: summed without a sync

    def start(self) -> None:
        """Where the loop's start-up ends."""
        self.started = time.perf_counter()

    def metrics(self) -> dict:
        metrics = {TRAINABLE_PARAMS: self.trainable}
        seconds = time.perf_counter() - self.started
        metrics[SAMPLES_PER_SECOND] = self.samples / seconds
        if self.task.counts_tokens:
            metrics[TOKENS_PER_SECOND] = float(self.tokens) / seconds
            if self.device is not None and self.device.type == "cuda":
                import torch

                peak = peak_flops(torch.cuda.get_device_name(self.device))
                if peak:
                    metrics[MFU] = 6 * self.params * metrics[TOKENS_PER_SECOND] / peak
        return metrics
