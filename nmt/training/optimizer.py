"""The optimizer and its learning rate: Adam or Nesterov SGD; warmup, then decay to zero over the budget (linear
or cosine), inverse square root decay, or annealing on a plateau."""

import logging
import math
from typing import Any

import torch

from nmt.config import TrainConfig

log = logging.getLogger(__name__)


def lr_at_step(step: int, peak_lr: float, warmup_steps: int) -> float:
    """Linear warmup to ``peak_lr`` over ``warmup_steps``, then decay with 1/sqrt(step).

    Vaswani et al. (2017, eq. 3) use ``d_model ** -0.5`` as the peak scale; we take the peak
    learning rate itself from the config, which is easier to compare across model sizes. Without
    warmup the rate decays from the first update, ``peak_lr / sqrt(step)``: the limit of the schedule
    as the warmup shrinks to nothing (a constant rate would be another schedule).
    """
    step = max(step, 1)
    if warmup_steps == 0:
        return peak_lr / math.sqrt(step)
    return peak_lr * min(step / warmup_steps, math.sqrt(warmup_steps / step))


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam, or SGD with Nesterov momentum (Gehring et al. 2017, section 5.2: momentum 0.99, lr 0.25).

    torch's Nesterov SGD keeps its momentum buffer in gradient units, so changing the rate (warmup,
    annealing) needs no correction of the buffer.
    """
    if config.optimizer == "nesterov":
        return torch.optim.SGD(
            model.parameters(),
            lr=config.lr,
            momentum=config.momentum,
            nesterov=True,
            weight_decay=config.weight_decay,
            fused=True,
        )
    return torch.optim.Adam(
        model.parameters(),
        lr=config.lr,
        betas=config.adam_betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        fused=True,  # one kernel for all parameters instead of a loop over them
    )


def spent(progress: dict[str, Any], config: TrainConfig) -> float:
    """The share of the training budget spent, in [0, 1]: the updates' share of ``max_steps`` or the training
    time's share of ``max_minutes``, whichever is larger."""
    share = progress["step"] / config.max_steps
    if config.max_minutes:
        share = max(share, progress["train_seconds"] / (60 * config.max_minutes))
    return min(share, 1.0)


def decayed(progress: dict[str, Any], config: TrainConfig) -> float:
    """The share of the ``linear``/``cosine`` decay done before the next update, in [0, 1]: 0 until the warmup
    ends, 1 where the budget ends (:func:`spent`).

    The decay runs over the budget left after the warmup: from the share spent before update ``warmup_steps``
    (the peak, at ``lr``), ``(warmup_steps - 1) / max_steps``, to 1. Under ``max_minutes`` the time spent when
    the warmup ended is not recorded, so the decay starts at that same share of the time: where the time runs
    out faster than the steps, it starts during the warmup and the peak stays below ``lr``, and the rate still
    falls continuously to zero where the time ends.
    """
    share = spent(progress, config)
    if share >= 1.0:
        return 1.0
    warmed_up = max(config.warmup_steps - 1, 0) / config.max_steps  # the share spent before the peak update
    if share <= warmed_up:
        return 0.0
    return (share - warmed_up) / (1.0 - warmed_up)


def get_lr(progress: dict[str, Any], config: TrainConfig) -> float:
    """The learning rate of the next update under ``config.lr_schedule``, from the run's ``progress``.

    Every schedule warms up linearly to ``lr`` over ``warmup_steps`` updates. ``linear`` and ``cosine`` then
    decay to zero where the budget ends (:func:`decayed`): a run that stops there has annealed, whatever its
    length. ``anneal_on_plateau`` multiplies the rate by the annealing factors so far (``progress["lr_scale"]``).
    """
    step = progress["step"] + 1
    if config.lr_schedule == "inverse_sqrt":
        return lr_at_step(step, config.lr, config.warmup_steps)
    warmup = min(step / config.warmup_steps, 1.0) if config.warmup_steps else 1.0
    if config.lr_schedule == "linear":
        return config.lr * warmup * (1.0 - decayed(progress, config))
    if config.lr_schedule == "cosine":
        return config.lr * warmup * 0.5 * (1.0 + math.cos(math.pi * decayed(progress, config)))
    return config.lr * warmup * progress["lr_scale"]


def warn_about_schedule(config: TrainConfig) -> None:
    """Warn when the warmup takes the whole budget (``warmup_steps >= max_steps``): the rate then reaches at most
    ``lr * max_steps / warmup_steps``, at the last update, and the run trains at a fraction of ``lr``."""
    if config.warmup_steps >= config.max_steps:
        peak = config.lr * config.max_steps / config.warmup_steps
        log.warning(
            "training.warmup_steps %d >= max_steps %d: the warmup takes the whole run, so the rate rises to at most "
            "%.2g, not lr %g; set warmup_steps well below max_steps (a tenth of it, say)",
            config.warmup_steps,
            config.max_steps,
            peak,
            config.lr,
        )


def anneal_on_plateau(progress: dict[str, Any], dev_loss: float, config: TrainConfig) -> None:
    """Divide the rate by ``1 / anneal_factor`` when ``dev_loss`` (log perplexity) is no better than the best.

    Gehring et al. (2017) anneal "once the validation perplexity stops improving ... until it falls
    below 10^-4"; they check once per epoch, we at every validation (``valid_every``). The state lives in
    ``progress`` (``lr_scale``, ``best_dev_loss``), which the checkpoint holds, so a resumed run anneals
    where an uninterrupted one does.
    """
    if config.lr_schedule != "anneal_on_plateau":
        return
    if progress["best_dev_loss"] is None or dev_loss < progress["best_dev_loss"]:
        progress["best_dev_loss"] = dev_loss
        return
    progress["lr_scale"] *= config.anneal_factor
    log.info("dev perplexity did not improve: learning rate annealed to %.2e", config.lr * progress["lr_scale"])


def is_annealed_out(progress: dict[str, Any], config: TrainConfig) -> bool:
    """Whether annealing has taken the rate below ``min_lr``, which ends training."""
    return config.lr_schedule == "anneal_on_plateau" and config.lr * progress["lr_scale"] < config.min_lr
