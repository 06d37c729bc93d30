"""Description: megatrain.Trainer (a transformers.Trainer) trains a tiny,
randomly initialised GPT-2 (2 layers, no download) for a few steps on a
CPU with megatrain's AdamW: the optimizer is megatrain.optim.AdamW, its
hyper-parameters come from TrainingArguments, and the loss falls. Fails
when torch or transformers is missing (tools/setup-python.sh installs
them); skips (77) only while python/megatrain/optim.py is not in the tree."""
import os
import sys
import tempfile

from common import check, finish, has_optim, need_torch

need_torch()
try:
    import transformers
except ImportError as e:
    print(f"FAIL transformers does not import ({e}): run tools/setup-python.sh")
    sys.exit(1)
if not has_optim():
    print("test_trainer: skipped: python/megatrain/optim.py is not in this tree (it comes from the wt-opt "
          "worktree), and megatrain.Trainer's optimizer is megatrain.optim.AdamW")
    sys.exit(77)
import torch  # noqa: E402

import megatrain as mt  # noqa: E402

torch.manual_seed(0)
cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
model = transformers.GPT2LMHeadModel(cfg)


class Data(torch.utils.data.Dataset):
    """Sequences where each token is (3 * previous + 1) mod 64: learnable in a few steps."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = [(i * 7) % 64]
        for _ in range(31):
            x.append((3 * x[-1] + 1) % 64)
        t = torch.tensor(x)
        return {"input_ids": t, "labels": t}


with tempfile.TemporaryDirectory(prefix="mt-trainer-test.") as out:
    args = transformers.TrainingArguments(
        output_dir=out, max_steps=8, per_device_train_batch_size=8, learning_rate=1e-2,
        adam_beta1=0.8, adam_epsilon=1e-7, weight_decay=0.1, warmup_steps=0, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
    tr = mt.Trainer(model=model, args=args, train_dataset=Data())
    tr.train()
    opt = tr.optimizer
    inner = getattr(opt, "optimizer", opt)  # accelerate wraps it
    check(type(inner).__module__ == "megatrain.optim" and type(inner).__name__ == "AdamW",
          f"the optimizer is megatrain.optim.AdamW: {type(inner).__module__}.{type(inner).__name__}")
    g = inner.param_groups
    check(len(g) == 2 and g[0]["betas"] == (0.8, 0.999) and g[0]["eps"] == 1e-7 and
          {x["weight_decay"] for x in g} == {0.1, 0.0},
          "hyper-parameters from TrainingArguments, no decay on biases and norms")
    losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
    check(len(losses) == 8 and losses[-1] < losses[0] - 0.5, f"loss falls over 8 steps: {losses}")
    try:
        mt.Trainer(model=model, args=args, optimizer_compression="3bit")
        check(False, "a bad optimizer_compression is refused")
    except ValueError as e:
        check("optimizer_compression" in str(e), f"a bad optimizer_compression is refused: {e}")
finish("test_trainer")
