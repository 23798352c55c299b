"""Stand-in for transformer_engine.pytorch: Linear and GroupedLinear with TE's contract.

Our own implementation of what Megatron relies on (see ../../README.md): constructor keywords,
parameter layout, weights read from the module at every forward, and the fused-wgrad handshake
with Megatron's DDP, in TE's two reference patterns of keeping the weight for backward.
"""

import os

import torch

from . import distributed, fp8, ops  # noqa: F401

__all__ = [
    "DotProductAttention",
    "GroupedLinear",
    "LayerNorm",
    "LayerNormLinear",
    "Linear",
    "RMSNorm",
]


def reference_pattern() -> str:
    """``saved`` (TE 2.1-2.5) or ``closure`` (TE >= 2.6), from ``TE_STANDIN_PATTERN``."""
    pattern = os.environ.get("TE_STANDIN_PATTERN", "saved")
    if pattern not in ("saved", "closure"):
        raise ValueError(f"TE_STANDIN_PATTERN must be 'saved' or 'closure', got {pattern!r}")
    return pattern


def _dummy_wgrad(weight: torch.Tensor) -> torch.Tensor:
    """What TE returns as wgrad after accumulating into main_grad: torch.empty there (garbage),
    NaN here, so that adding it anywhere shows; zeros when the weight asks for zero_out_wgrad."""
    if getattr(weight, "zero_out_wgrad", False):
        return torch.zeros_like(weight.main_grad, dtype=weight.dtype)
    return torch.full_like(weight.main_grad, float("nan"), dtype=weight.dtype)


def _wgrad_for_autograd(ctx, weight: torch.Tensor, wgrad: torch.Tensor | None):
    """TE's handshake with Megatron's DDP for one weight (after wgrad was computed)."""
    if not ctx.weights_requires_grad:
        return None
    if ctx.fuse_wgrad_accumulation:
        if hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
            return _dummy_wgrad(weight)
        return None
    return wgrad


class _GroupedLinearFunction(torch.autograd.Function):
    """y_i = x_i @ W_i^T (+ b_i) over the m_splits of the input."""

    @staticmethod
    def forward(ctx, inp, m_splits, use_bias, fuse_wgrad_accumulation, num_gemms, wgrad_store,
                *params):
        weights, biases = list(params[:num_gemms]), list(params[num_gemms:])
        ctx.wgrad_store = wgrad_store
        inputmats = torch.split(inp.reshape(-1, inp.shape[-1]), m_splits)
        outs = []
        for i, (x, w) in enumerate(zip(inputmats, weights)):
            y = x @ w.t()
            if use_bias:
                y = y + biases[i]
            outs.append(y)
        out = torch.cat(outs)

        # What TE keeps: the inputs and the weights as saved tensors (both patterns) ...
        ctx.save_for_backward(*inputmats, *weights)
        ctx.num_gemms = num_gemms
        ctx.m_splits = list(m_splits)
        ctx.use_bias = use_bias
        ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        ctx.weights_requires_grad = weights[0].requires_grad
        ctx.inp_shape = inp.shape
        ctx.requires_dgrad = inp.requires_grad
        fused = fuse_wgrad_accumulation and ctx.weights_requires_grad
        if reference_pattern() == "saved":
            # ... TE 2.1-2.5: plus the main_grad tensors themselves.
            ctx.main_grads = [w.main_grad if fused else None for w in weights]
        else:
            # ... TE >= 2.6: plus closures over the weights (which keep their objects alive).
            ctx.main_grad_funcs = [
                (lambda j=i: weights[j].main_grad) if fused else (lambda: None)
                for i in range(num_gemms)
            ]
        return out.view(*inp.shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        n = ctx.num_gemms
        saved = ctx.saved_tensors
        inputmats, weights = saved[:n], saved[n:]
        if hasattr(ctx, "main_grads"):
            main_grads = ctx.main_grads
        else:
            main_grads = [f() for f in ctx.main_grad_funcs]
        grads = torch.split(grad_output.reshape(-1, grad_output.shape[-1]), ctx.m_splits)
        dgrad = None
        if ctx.requires_dgrad:
            dgrad = torch.cat([g @ w for g, w in zip(grads, weights)]).view(ctx.inp_shape)
        wgrads: list[torch.Tensor | None] = [None] * n
        if ctx.wgrad_store is not None and ctx.weights_requires_grad:
            # delay_wgrad_compute: the weight gradients (and TE's mark) come later, in
            # backward_dw; autograd gets no wgrad now.
            ctx.wgrad_store.append((inputmats, grads, weights, main_grads,
                                    ctx.fuse_wgrad_accumulation))
        elif ctx.weights_requires_grad:
            for i in range(n):
                wgrad = grads[i].t() @ inputmats[i]
                if ctx.fuse_wgrad_accumulation:
                    main_grads[i].add_(wgrad.to(main_grads[i].dtype))
                    wgrad = None
                wgrads[i] = _wgrad_for_autograd(ctx, weights[i], wgrad)
        bgrads = [g.sum(dim=0) for g in grads] if ctx.use_bias else [None] * n
        return (dgrad, None, None, None, None, None, *wgrads,
                *(bgrads if ctx.use_bias else []))


class _LinearFunction(torch.autograd.Function):
    """y = x @ W^T (+ b), with the same handshake as the grouped version."""

    @staticmethod
    def forward(ctx, inp, weight, bias, fuse_wgrad_accumulation):
        out = inp @ weight.t()
        if bias is not None:
            out = out + bias
        ctx.save_for_backward(inp, weight)
        ctx.has_bias = bias is not None
        ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        ctx.weights_requires_grad = weight.requires_grad
        fused = fuse_wgrad_accumulation and weight.requires_grad
        if reference_pattern() == "saved":
            ctx.main_grad = weight.main_grad if fused else None
        else:
            ctx.main_grad_func = (lambda: weight.main_grad) if fused else (lambda: None)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        inp, weight = ctx.saved_tensors
        main_grad = ctx.main_grad if hasattr(ctx, "main_grad") else ctx.main_grad_func()
        x2 = inp.reshape(-1, inp.shape[-1])
        g2 = grad_output.reshape(-1, grad_output.shape[-1])
        dgrad = grad_output @ weight
        wgrad = g2.t() @ x2
        if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
            main_grad.add_(wgrad.to(main_grad.dtype))
            wgrad = None
        wgrad = _wgrad_for_autograd(ctx, weight, wgrad)
        bgrad = g2.sum(dim=0) if ctx.has_bias else None
        return dgrad, wgrad, bgrad, None


def _device(device) -> torch.device:
    return torch.device("cpu" if device is None else device)


def _init(weight: torch.Tensor, init_method, get_rng_state_tracker, rng_tracker_name) -> None:
    if init_method is None:
        torch.nn.init.normal_(weight, mean=0.0, std=0.023)
    else:
        init_method(weight)


class TransformerEngineBaseModule(torch.nn.Module):
    """The bits of TE's base module Megatron calls outside the tests' paths."""

    def init_fp8_metadata(self, num_gemms: int = 1) -> None:
        self.fp8_meta = {"recipe": None}

    def set_tensor_parallel_group(self, tp_group) -> None:
        self.tp_group = tp_group

    def backward_dw(self) -> None:
        return None


class Linear(TransformerEngineBaseModule):
    """TE's Linear: ``weight`` [out, in] (sharded by parallel_mode and tp_size), ``bias``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        sequence_parallel: bool = False,
        fuse_wgrad_accumulation: bool = False,
        tp_group=None,
        tp_size: int = 1,
        get_rng_state_tracker=None,
        rng_tracker_name: str | None = None,
        init_method=None,
        bias: bool = True,
        return_bias: bool = False,
        params_dtype: torch.dtype | None = None,
        parallel_mode: str | None = None,
        device=None,
        **kwargs,
    ):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.use_bias, self.return_bias = bias, return_bias
        self.parallel_mode = parallel_mode
        self.sequence_parallel = sequence_parallel
        self.tp_group, self.tp_size = tp_group, tp_size
        self.unknown_kwargs = dict(kwargs)
        if parallel_mode == "column":
            out_features = out_features // tp_size
        elif parallel_mode == "row":
            in_features = in_features // tp_size
        dtype = params_dtype or torch.float32
        weight = torch.empty(out_features, in_features, dtype=dtype, device=_device(device))
        _init(weight, init_method, get_rng_state_tracker, rng_tracker_name)
        self.weight = torch.nn.Parameter(weight)
        if bias:
            self.bias = torch.nn.Parameter(
                torch.zeros(out_features, dtype=dtype, device=weight.device)
            )
        else:
            self.register_parameter("bias", None)

    def forward(self, inp: torch.Tensor, is_first_microbatch=None):
        bias = None if (self.return_bias or not self.use_bias) else self.bias
        out = _LinearFunction.apply(inp, self.weight, bias, self.fuse_wgrad_accumulation)
        if self.return_bias:
            return out, self.bias
        return out


class GroupedLinear(TransformerEngineBaseModule):
    """TE's GroupedLinear: per-GEMM ``weight{i}``/``bias{i}`` (or one grouped ``weight``, as TE's
    ``single_grouped_weight``), all fetched from the module at every forward."""

    def __init__(
        self,
        num_gemms: int,
        in_features: int,
        out_features: int,
        sequence_parallel: bool = False,
        fuse_wgrad_accumulation: bool = False,
        tp_group=None,
        tp_size: int = 1,
        get_rng_state_tracker=None,
        rng_tracker_name: str | None = None,
        init_method=None,
        bias: bool = True,
        return_bias: bool = False,
        params_dtype: torch.dtype | None = None,
        parallel_mode: str | None = None,
        device=None,
        single_grouped_weight: bool | None = None,
        **kwargs,
    ):
        super().__init__()
        if single_grouped_weight is None:  # what a build with grouped weights defaults to
            single_grouped_weight = os.environ.get("TE_STANDIN_SINGLE_GROUPED_WEIGHT") == "1"
        self.num_gemms = num_gemms
        self.in_features, self.out_features = in_features, out_features
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.use_bias, self.return_bias = bias, return_bias
        self.parallel_mode = parallel_mode
        self.single_grouped_weight = single_grouped_weight
        # TE >= 2.3: weight gradients computed later, by backward_dw (the all-to-all overlap)
        self.delay_wgrad_compute = bool(kwargs.pop("delay_wgrad_compute", False))
        self.wgrad_store: list = []
        self.unknown_kwargs = dict(kwargs)
        dtype = params_dtype or torch.float32
        packed = torch.empty(
            num_gemms, out_features, in_features, dtype=dtype, device=_device(device)
        )
        for i in range(num_gemms):
            _init(packed[i], init_method, get_rng_state_tracker, rng_tracker_name)
        if single_grouped_weight:
            self.weight = torch.nn.Parameter(packed)
        else:
            for i in range(num_gemms):
                self.register_parameter(f"weight{i}", torch.nn.Parameter(packed[i].clone()))
        for i in range(num_gemms):
            b = torch.zeros(out_features, dtype=dtype, device=packed.device) if bias else None
            self.register_parameter(f"bias{i}", None if b is None else torch.nn.Parameter(b))

    def _weight_tensors(self) -> list[torch.Tensor]:
        if self.single_grouped_weight:
            return list(self.weight.unbind(0))
        return [getattr(self, f"weight{i}") for i in range(self.num_gemms)]

    def forward(self, inp: torch.Tensor, m_splits: list[int], is_first_microbatch=None):
        weights = self._weight_tensors()
        use_bias = self.use_bias and not self.return_bias
        biases = [getattr(self, f"bias{i}") for i in range(self.num_gemms)] if use_bias else []
        out = _GroupedLinearFunction.apply(
            inp,
            m_splits,
            use_bias,
            self.fuse_wgrad_accumulation,
            self.num_gemms,
            self.wgrad_store if self.delay_wgrad_compute else None,
            *weights,
            *biases,
        )
        if self.return_bias:
            return out, torch.cat([getattr(self, f"bias{i}") for i in range(self.num_gemms)])
        return out

    def backward_dw(self) -> None:
        """The delayed weight gradients, as TE does them: accumulated into ``main_grad`` (fused)
        and ``grad_added_to_main_grad`` set on the weight tensors kept at forward, here."""
        while self.wgrad_store:
            inputmats, grads, weights, main_grads, fused = self.wgrad_store.pop(0)
            for x, g, w, main_grad in zip(inputmats, grads, weights, main_grads):
                wgrad = g.t() @ x
                if fused and main_grad is not None:
                    main_grad.add_(wgrad.to(main_grad.dtype))
                    if hasattr(w, "grad_added_to_main_grad"):
                        w.grad_added_to_main_grad = True
                else:
                    w.grad = wgrad if w.grad is None else w.grad + wgrad


class _Placeholder(TransformerEngineBaseModule):
    """Modules Megatron subclasses at import; constructing one in a test is an error."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"transformer_engine stand-in: {type(self).__name__}")


class LayerNormLinear(_Placeholder):
    pass


class LayerNorm(_Placeholder):
    pass


class RMSNorm(_Placeholder):
    pass


class DotProductAttention(_Placeholder):
    pass
