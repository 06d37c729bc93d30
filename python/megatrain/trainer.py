"""megatrain.Trainer: transformers.Trainer with megatrain's AdamW.

    import megatrain as mt
    trainer = mt.Trainer(model=model, args=TrainingArguments(...), train_dataset=ds,
                         optimizer_compression=True)     # optional; True = mt.RECOMMENDED_COMPRESSION
    trainer.train()

Everything else is transformers.Trainer's: its parameter groups (no weight
decay on biases and norms), learning-rate schedule, gradient clipping and
checkpoints. Only the optimizer class changes: megatrain.AdamW with
TrainingArguments' learning_rate, adam_beta1/2 and adam_epsilon, unless the
caller passed `optimizers=` or `optimizer_cls_and_kwargs=` (theirs wins).
Importing this module without transformers raises ImportError saying so.
"""
try:
    import transformers
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("megatrain.Trainer needs transformers (pip install 'megatrain[trainer]' or "
                      f"pip install transformers); importing it failed: {e}") from e

from . import _env


class Trainer(transformers.Trainer):
    def __init__(self, *args, optimizer_compression=None, **kwargs):
        # checked now, not at the first step minutes later
        self._mt_compression = None if optimizer_compression is None else _env.compression(optimizer_compression)
        super().__init__(*args, **kwargs)

    def create_optimizer(self, *args, **kwargs):
        if self.optimizer is None and getattr(self, "optimizer_cls_and_kwargs", None) is None:
            from .optim import AdamW
            kw = {"lr": self.args.learning_rate, "betas": (self.args.adam_beta1, self.args.adam_beta2),
                  "eps": self.args.adam_epsilon}
            if self._mt_compression is not None:
                kw["compression"] = False if self._mt_compression == "none" else self._mt_compression
            self.optimizer_cls_and_kwargs = (AdamW, kw)
        return super().create_optimizer(*args, **kwargs)
