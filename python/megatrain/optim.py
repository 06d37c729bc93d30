"""mtalloc's host optimizer as torch optimizers: ``AdamW`` and ``Adam``.

``step()`` runs the update on mtalloc's host thread pool through the C API
(``mt_optim_*`` in libmtalloc/mtalloc.h), on FP32 masters and Adam state in
host memory. CPU tensors are registered by their ``data_ptr()`` (float32
parameters are their own master and are updated in place; bf16/fp16
parameters get an FP32 master and receive rounded copies); CUDA tensors
allocated under mtalloc are registered with ``mt_optim_register_device``
(gradients are read from the device, new weights written into mtalloc's
host copy). Parameters must be contiguous and keep their storage
(``p.data = ...`` is refused at the next step). A bf16/fp16 or CUDA
parameter's master is a copy: it is re-read from the weights before the
parameter's first step (so loading the model after creating the optimizer
works) and by ``load_state_dict`` when the dict has no ``master``; after
that the optimizer owns the weights, and writing them behind its back is
undone at the next step.

Exactness: with FP32 state and ``MT_OPTIM_KERNEL=mkl`` (MKL's own square
root, torch 2.15.0 under ``ATEN_CPU_CAPABILITY=default``) the result equals
``torch.optim.AdamW`` / ``Adam`` (``foreach=False``) bit for bit, including
param groups, LR schedulers (lr is read from ``param_groups`` at each
step), ``maximize``, ``amsgrad`` and ``clip_grad_norm_``. The other kernels
differ from torch by the square root's last bit (libmtalloc/optim/adam.h).

Compression: ``compression=False`` or ``'none'`` (FP32 m and v), ``'8bit'``,
``'4bit'``, or ``True`` = ``'8bit'``: block-wise 8-bit state keeps training
within noise of FP32 (the bitsandbytes result) at a quarter of the memory;
4-bit halves it again at a measurable cost in loss, so it is opt-in. The
default ``None`` takes ``MT_OPTIMIZER_COMPRESSION`` (what ``mt.init``'s
``optimizer_compression`` sets; default none). Tensors under 4096 elements
keep FP32 state. amsgrad needs FP32 state.

Gradient clipping: ``opt.clip_grad_norm_(max_norm)`` returns the global
norm exactly as ``torch.nn.utils.clip_grad_norm_(params, max_norm)`` over
the optimizer's parameters (in param-group order) and scales the
gradients inside the next ``step()`` (the ``.grad`` tensors are left as
they are). ``max_grad_norm=`` in the constructor does the same at every
step.

Gradient offload (``offload_grads``, default on when any parameter is a
CUDA tensor): a ``register_post_accumulate_grad_hook`` on each parameter
queues its update on the host as soon as its gradient is final, while
backward goes on; ``step()`` then queues what is left and waits. With
gradient accumulation, tell the optimizer which backward is the last:
``grad_accum_steps=N`` (the hook queues on the N-th accumulation of a
parameter since the last step), or ``opt.accumulating(True)`` before the
micro-steps that are not the last and ``opt.accumulating(False)`` before
the last one. Global-norm clipping (``max_grad_norm``) needs every gradient
first, so with it the hooks do nothing and ``step()`` does all the work at
the end. After each ``step()``: ``last_step_overlap_s`` is the host
optimizer time (worker CPU seconds) that ran before ``step()`` was called,
``last_step_work_s`` the total, ``last_step_overlap_fraction`` their ratio.

Checkpoints: ``state_dict()`` has torch's shape (``state[i]['step']`` a
float32 tensor, ``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq`` tensors shaped
like the parameter; a bf16/fp16 or CUDA parameter adds ``master``; quantised moments
are stored raw as ``exp_avg_codes``/``exp_avg_scales`` (uint8 codes, float32
block scales; format in mtalloc.h) so a resume is bit-identical), which
``torch.save``/``torch.load`` and HF Trainer resume handle. When the state
is larger than ``checkpoint_threshold_bytes`` (default 1 GiB) the dict holds
no state: ``state_dict()`` writes mtalloc's checkpoint file
(``mt_optim_save``) under ``checkpoint_dir`` (default ``$MT_OFFLOAD_DIR`` or
the working directory; named by the step count) and the dict's
``'mt_checkpoint'`` names it; keep the file with the checkpoint.
``load_state_dict`` accepts either form.
"""
import ctypes
import os

import torch

from megatrain._lib import lib

__all__ = ["AdamW", "Adam"]

_F32, _BF16, _F16 = 0, 1, 2
_DTYPES = {torch.float32: _F32, torch.bfloat16: _BF16, torch.float16: _F16}
_STATES = {None: -1, False: 0, "none": 0, "8bit": 1, "4bit": 2, True: 1}  # True: megatrain.RECOMMENDED_COMPRESSION; -1: the environment's
_FIELDS = {"master": 0, "exp_avg": 1, "exp_avg_sq": 2, "max_exp_avg_sq": 3}
# The meaning of raw quantised codes in state_dict(): 2 since 4-bit exp_avg_sq
# moved to the power-of-two map, 3 since 4-bit exp_avg did
# (libmtalloc/optim/codec.c; the C checkpoint format is 3 for the same
# reason); dicts without the key are format 1.
_STATE_FORMAT = 3


class _Params(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("adamw", ctypes.c_int), ("amsgrad", ctypes.c_int), ("maximize", ctypes.c_int),
                ("kernel", ctypes.c_int), ("state", ctypes.c_int), ("threads", ctypes.c_int)]


class _Info(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("dtype", ctypes.c_int), ("step", ctypes.c_float),
                ("amsgrad", ctypes.c_int), ("state_bits", ctypes.c_int),
                ("code_bytes", ctypes.c_size_t), ("blocks", ctypes.c_size_t)]


def _declare():
    P, V, I, S, F = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_float
    sigs = {
        "mt_optim_defaults": (None, [ctypes.POINTER(_Params)]),
        "mt_optim_create": (I, [ctypes.POINTER(_Params), ctypes.POINTER(P)]),
        "mt_optim_destroy": (None, [P]),
        "mt_optim_register_grad": (I, [P, V, S, I, V, I]),
        "mt_optim_register_device": (I, [P, V, S, I, V, I]),
        "mt_optim_step": (I, [P, I, F]),
        "mt_optim_wait": (I, [P]),
        "mt_optim_set_grad": (I, [P, I, V]),
        "mt_optim_set_hparams": (I, [P, I, ctypes.POINTER(_Params)]),
        "mt_optim_grad_norm": (I, [P, ctypes.POINTER(F)]),
        "mt_optim_clip_coef": (F, [F, ctypes.c_double]),
        "mt_optim_param_info": (I, [P, I, ctypes.POINTER(_Info)]),
        "mt_optim_set_step": (I, [P, I, F]),
        "mt_optim_state_read": (I, [P, I, I, V, S]),
        "mt_optim_state_write": (I, [P, I, I, V, S]),
        "mt_optim_state_raw_read": (I, [P, I, I, V, S, V, S]),
        "mt_optim_state_raw_write": (I, [P, I, I, V, S, V, S]),
        "mt_optim_work_ns": (ctypes.c_uint64, [P]),
        "mt_optim_save": (I, [P, ctypes.c_char_p]),
        "mt_optim_load": (I, [P, ctypes.c_char_p]),
        "mt_optim_error": (ctypes.c_char_p, [P]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


_declare()


def _check(rc, what):
    if rc < 0:
        raise OSError(-rc, "megatrain: %s failed: %s" % (what, os.strerror(-rc)))
    return rc


class _HostAdam(torch.optim.Optimizer):
    _adamw = 1

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False, compression=None, offload_grads=None,
                 grad_accum_steps=1, max_grad_norm=None, threads=0,
                 checkpoint_threshold_bytes=1 << 30, checkpoint_dir=None,
                 foreach=None, fused=None, capturable=False, differentiable=False):
        # torch's own switches, accepted so that code written for
        # torch.optim runs unchanged: foreach has no meaning here (the host
        # kernel is one fused pass); the others cannot be honoured
        if fused or capturable or differentiable:
            raise ValueError("megatrain: fused, capturable and differentiable are torch's GPU "
                             "kernels' options; the host optimizer has none of them")
        if compression not in _STATES:
            raise ValueError("compression must be None, False, True, 'none', '8bit' or '4bit', "
                             "not %r" % (compression,))
        if amsgrad and _STATES[compression] > 0:
            raise ValueError("amsgrad needs FP32 state: compression=False")
        if grad_accum_steps < 1:
            raise ValueError("grad_accum_steps must be >= 1")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize)
        p = _Params()
        lib.mt_optim_defaults(ctypes.byref(p))
        self._fill(p, defaults)
        p.state, p.threads = _STATES[compression], threads
        self._c = ctypes.c_void_p()
        self._params = []       # registration order: the C index
        self._index = {}        # id(param) -> C index
        self._ptr = []          # data_ptr at registration, to catch p.data = ...
        self._group = []        # C index -> index of its param group (groups keep their order)
        self._inflight = {}     # C index -> grad tensor kept alive while its step runs
        self._hooks = []
        self._hooked = False    # hooks go on new groups' parameters too
        self._micro = []        # accumulations of each parameter since its last step
        self._fresh = set()     # never stepped: the master is re-read from the weights first
        self._accumulating = False
        self._clip = 1.0
        self._amsgrad = bool(amsgrad)
        self._offload = offload_grads
        self.grad_accum_steps = grad_accum_steps
        self.max_grad_norm = max_grad_norm
        self.checkpoint_threshold_bytes = checkpoint_threshold_bytes
        self.checkpoint_dir = checkpoint_dir
        self.compression = compression
        self.last_step_overlap_s = 0.0
        self.last_step_work_s = 0.0
        self.last_step_overlap_fraction = 0.0
        rc = lib.mt_optim_create(ctypes.byref(p), ctypes.byref(self._c))
        if rc == -22 and amsgrad:  # EINVAL: the environment asked for quantised state
            raise ValueError("amsgrad needs FP32 state: MT_OPTIMIZER_COMPRESSION is set; pass "
                             "compression=False")
        _check(rc, "mt_optim_create")
        self._work0 = lib.mt_optim_work_ns(self._c)
        super().__init__(params, defaults)
        if self._offload is None:
            self._offload = any(p.is_cuda for p in self._params)
        if self._offload:
            for p in self._params:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._hook))
            self._hooked = True

    def _fill(self, p, group):
        p.lr, (p.beta1, p.beta2), p.eps = group["lr"], group["betas"], group["eps"]
        p.weight_decay, p.adamw = group["weight_decay"], self._adamw
        p.amsgrad, p.maximize = int(group["amsgrad"]), int(group["maximize"])

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        if bool(group["amsgrad"]) != self._amsgrad:
            raise ValueError("megatrain: amsgrad must be the same in every param group")
        self._wait()  # registration is refused while steps are in flight
        for p in group["params"]:
            self._register(p)
            self._group.append(len(self.param_groups) - 1)
            if self._hooked:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._hook))

    def _register(self, p):
        if p.dtype not in _DTYPES:
            raise TypeError("megatrain: parameters must be float32, bfloat16 or float16, not %s"
                            % p.dtype)
        if not p.is_contiguous():
            raise ValueError("megatrain: parameters must be contiguous")
        dt = _DTYPES[p.dtype]
        # the gradient is set at each step; until then it points at the
        # weights, which are never read as a gradient before that
        reg = lib.mt_optim_register_device if p.is_cuda else lib.mt_optim_register_grad
        idx = _check(reg(self._c, p.data_ptr(), p.numel(), dt, p.data_ptr(), dt),
                     "registering a parameter" + (" (CUDA tensors need LD_PRELOAD=libmtalloc.so)"
                                                  if p.is_cuda else ""))
        assert idx == len(self._params)
        self._index[id(p)] = idx
        self._params.append(p)
        self._ptr.append(p.data_ptr())
        self._micro.append(0)
        self._fresh.add(idx)

    def _own_master(self, p):
        """Whether the C master is a copy (not the parameter's own memory)."""
        return p.is_cuda or p.dtype != torch.float32

    def _master_from_weights(self, i):
        """The master of parameter i := its current weights, widened: the
        model may have been loaded or edited since registration."""
        p = self._params[i]
        if self._own_master(p):
            t = p.detach().to("cpu", torch.float32).contiguous()
            _check(lib.mt_optim_state_write(self._c, i, _FIELDS["master"], t.data_ptr(),
                                            t.numel()), "state_write(master)")

    def _queue(self, i, group, clip):
        """Queues parameter i's step with its gradient and group's values."""
        p = self._params[i]
        if p.data_ptr() != self._ptr[i]:
            raise RuntimeError("megatrain: a parameter's storage changed (p.data = ...); "
                               "create the optimizer after the model is final")
        g = p.grad
        if g.dtype != p.dtype or not g.is_contiguous() or g.is_sparse:
            raise TypeError("megatrain: gradients must be dense, contiguous and of the "
                            "parameter's dtype")
        if i in self._fresh:
            self._master_from_weights(i)
            self._fresh.discard(i)
        hp = _Params()
        self._fill(hp, group)
        _check(lib.mt_optim_set_hparams(self._c, i, ctypes.byref(hp)), "set_hparams")
        _check(lib.mt_optim_set_grad(self._c, i, g.data_ptr()), "set_grad")
        if p.is_cuda:
            # the gradient's kernels must be done before the host reads it
            torch.cuda.current_stream(p.device).synchronize()
        self._inflight[i] = g  # alive until its step is over
        _check(lib.mt_optim_step(self._c, i, clip), "step")
        self._micro[i] = 0

    def _hook(self, p):
        i = self._index[id(p)]
        self._micro[i] += 1
        if self._accumulating or self.max_grad_norm is not None or self._clip != 1.0:
            return
        if self._micro[i] < self.grad_accum_steps or i in self._inflight:
            return
        with torch.no_grad():
            self._queue(i, self.param_groups[self._group[i]], 1.0)

    def accumulating(self, flag=True):
        """True: the coming backward passes are micro-steps that are not the
        last of a gradient-accumulation step (the hooks queue nothing);
        False: the next backward is the last one."""
        self._accumulating = bool(flag)

    def _wait(self):
        if self._c:
            _check(lib.mt_optim_wait(self._c), "wait")
        self._inflight.clear()

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm):
        """torch.nn.utils.clip_grad_norm_(params, max_norm) over this
        optimizer's parameters, bit for bit: returns the total norm (a
        float32 tensor) and scales the gradients inside the next step()."""
        if self._inflight:
            raise RuntimeError("megatrain: gradient hooks already queued steps; pass "
                               "max_grad_norm= to the optimizer to clip with gradient offload")
        grads = [p.grad for p in self._params]
        if any(g is None for g in grads) or any(p.is_cuda for p in self._params):
            # not every parameter has a gradient (or they live on a GPU): torch's own
            params = [p for p in self._params if p.grad is not None]
            norms = [torch.linalg.vector_norm(p.grad.float(), 2) for p in params]
            total = torch.linalg.vector_norm(torch.stack(norms), 2) if norms else torch.tensor(0.0)
        else:
            for i, g in enumerate(grads):
                _check(lib.mt_optim_set_grad(self._c, i, g.data_ptr()), "set_grad")
            t = ctypes.c_float()
            _check(lib.mt_optim_grad_norm(self._c, ctypes.byref(t)), "grad_norm")
            total = torch.tensor(t.value, dtype=torch.float32)
        self._clip = lib.mt_optim_clip_coef(float(total), float(max_norm))
        return total

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        work_at_call = lib.mt_optim_work_ns(self._c)
        if self.max_grad_norm is not None:
            self.clip_grad_norm_(self.max_grad_norm)
        for group in self.param_groups:
            for p in group["params"]:
                i = self._index[id(p)]
                if p.grad is None or i in self._inflight:
                    continue  # no gradient: torch skips it too (its step count stays)
                self._queue(i, group, self._clip)
        self._wait()
        self._clip = 1.0
        work_end = lib.mt_optim_work_ns(self._c)
        total = work_end - self._work0
        self.last_step_overlap_s = (work_at_call - self._work0) / 1e9
        self.last_step_work_s = total / 1e9
        self.last_step_overlap_fraction = (work_at_call - self._work0) / total if total else 0.0
        self._work0 = work_end
        return loss

    # ---- checkpoints ----------------------------------------------------------

    def _state_bytes(self):
        """Bytes a torch-shaped state_dict would hold."""
        total = 0
        for i, p in enumerate(self._params):
            info = self._info(i)
            n = p.numel()
            total += 4 * n if self._own_master(p) else 0
            total += (2 * (info.code_bytes + 4 * info.blocks) if info.state_bits
                      else 4 * n * (3 if info.amsgrad else 2))
        return total

    def _info(self, i):
        info = _Info()
        _check(lib.mt_optim_param_info(self._c, i, ctypes.byref(info)), "param_info")
        return info

    def state_dict(self):
        self._wait()
        saved, self.state = self.state, {}
        try:
            sd = super().state_dict()  # torch's packed param_groups
        finally:
            self.state = saved
        if self._state_bytes() > self.checkpoint_threshold_bytes:
            steps = max((self._info(i).step for i in range(len(self._params))), default=0.0)
            folder = self.checkpoint_dir or os.environ.get("MT_OFFLOAD_DIR") or "."
            path = os.path.abspath(os.path.join(folder, "mt_optim_%x_step%d.mtck"
                                                % (id(self), int(steps))))
            rc = lib.mt_optim_save(self._c, path.encode())
            if rc < 0:
                raise OSError(-rc, "megatrain: mt_optim_save: %s"
                              % lib.mt_optim_error(self._c).decode())
            sd["mt_checkpoint"] = path
            return sd
        state = {}
        for i, p in enumerate(self._params):
            info = self._info(i)
            if info.step == 0:
                continue  # never stepped: torch has no state for it either
            st = {"step": torch.tensor(info.step, dtype=torch.float32)}
            fields = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if info.amsgrad else [])
            if self._own_master(p):
                fields.append("master")
            for name in fields:
                if info.state_bits and name in ("exp_avg", "exp_avg_sq"):
                    codes = torch.empty(info.code_bytes, dtype=torch.uint8)
                    scales = torch.empty(info.blocks, dtype=torch.float32)
                    _check(lib.mt_optim_state_raw_read(self._c, i, _FIELDS[name],
                                                       codes.data_ptr(), info.code_bytes,
                                                       scales.data_ptr(), info.blocks),
                           "state_raw_read")
                    st[name + "_codes"], st[name + "_scales"] = codes, scales
                    st["mt_state_bits"] = info.state_bits
                    st["mt_state_format"] = _STATE_FORMAT
                    continue
                t = torch.empty(p.shape, dtype=torch.float32)
                _check(lib.mt_optim_state_read(self._c, i, _FIELDS[name], t.data_ptr(),
                                               p.numel()), "state_read")
                st[name] = t
            state[i] = st
        sd["state"] = state
        return sd

    def load_state_dict(self, state_dict):
        self._wait()
        groups = state_dict["param_groups"]
        # torch's load maps the saved indices onto our parameters and takes
        # the groups' values; the state it would cast to each parameter's
        # dtype is loaded here instead, untouched
        super().load_state_dict({"state": {}, "param_groups": groups})
        self.state.clear()
        if "mt_checkpoint" in state_dict:
            rc = lib.mt_optim_load(self._c, state_dict["mt_checkpoint"].encode())
            if rc < 0:
                raise OSError(-rc, "megatrain: mt_optim_load: %s"
                              % lib.mt_optim_error(self._c).decode())
            return
        order = [p for g in self.param_groups for p in g["params"]]
        saved_ids = [k for g in groups for k in g["params"]]
        for saved_id, p in zip(saved_ids, order):
            i = self._index[id(p)]
            st = state_dict["state"].get(saved_id)
            if st is None:
                _check(lib.mt_optim_set_step(self._c, i, 0.0), "set_step")
                self._fresh.add(i)
                continue
            self._fresh.discard(i)
            if "master" not in st:
                self._master_from_weights(i)  # e.g. a dict from torch.optim.AdamW
            info = self._info(i)
            for name, f in _FIELDS.items():
                if name + "_codes" in st:
                    if st.get("mt_state_bits") != info.state_bits:
                        raise ValueError("megatrain: the checkpoint's state is %s-bit, this "
                                         "optimizer's %s" % (st.get("mt_state_bits"),
                                                             info.state_bits or "FP32"))
                    if info.state_bits == 4 and st.get("mt_state_format", 1) != _STATE_FORMAT:
                        raise ValueError("megatrain: the checkpoint's 4-bit state is format %s, "
                                         "whose codes use the dynamic-exponent map this build "
                                         "no longer decodes (format %d: powers of two); resume "
                                         "it with the build that wrote it"
                                         % (st.get("mt_state_format", 1), _STATE_FORMAT))
                    codes = st[name + "_codes"].contiguous()
                    scales = st[name + "_scales"].to(torch.float32).contiguous()
                    _check(lib.mt_optim_state_raw_write(self._c, i, f, codes.data_ptr(),
                                                        codes.numel(), scales.data_ptr(),
                                                        scales.numel()), "state_raw_write")
                elif name in st:
                    t = st[name].detach().to("cpu", torch.float32).contiguous()
                    if t.numel() != p.numel():
                        raise ValueError("megatrain: state %r of parameter %d has %d elements, "
                                         "the parameter %d" % (name, i, t.numel(), p.numel()))
                    _check(lib.mt_optim_state_write(self._c, i, f, t.data_ptr(), t.numel()),
                           "state_write")
            step = st["step"]
            _check(lib.mt_optim_set_step(self._c, i, float(step)), "set_step")

    def __del__(self):
        c = getattr(self, "_c", None)
        if c:
            lib.mt_optim_destroy(c)
            self._c = ctypes.c_void_p()


class AdamW(_HostAdam):
    """torch.optim.AdamW on mtalloc's host optimizer (see the module's text)."""
    _adamw = 1

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, **kw):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kw)


class Adam(_HostAdam):
    """torch.optim.Adam (L2 weight decay) on mtalloc's host optimizer."""
    _adamw = 0

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, **kw):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kw)
