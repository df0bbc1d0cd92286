"""A TrainerCallback that records how the model was wrapped once training has taken its first step:
FSDP2 turns each sharded module into an `FSDP<Module>` class and its parameters into DTensors, so
these counts show FSDP engaged, not only that a run completed. benchmarks/gpu.py adds it to a
sweep as `+callbacks.probe._target_=gpu_probe.ShardedParams +callbacks.probe.out=FILE` and to its
plain Trainer; it writes one JSON object to `out`."""

from __future__ import annotations

import json

from transformers import TrainerCallback


def wrapping(model) -> dict:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch < 2.4
        DTensor = ()
    params = list(model.parameters())
    sharded = [p for p in params if isinstance(p, DTensor) if DTensor]
    return {
        "params": len(params),
        "dtensor_params": len(sharded),
        "placements": sorted({str(p.placements) for p in sharded}),
        "fsdp_modules": sum(type(m).__name__.startswith("FSDP") for m in model.modules()),
        "model_class": type(model).__name__,
    }


class ShardedParams(TrainerCallback):
    def __init__(self, out: str):
        self.out, self.done = out, False

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not self.done and model is not None and state.is_world_process_zero:
            with open(self.out, "w") as f:
                json.dump(wrapping(model), f)
            self.done = True
