"""Reference calibration backend: eager attention, post-softmax rows rewritten with nnsight.

This is the independent check of :mod:`llamaindex_posfair.backends.fast`. It
does what the published method does: the model runs its *eager* attention,
which materialises every post-softmax attention matrix ``a`` (``[B, H, L, L]``);
in each calibrated layer the softmax's output is replaced, through nnsight, by

    ``a_hat = where(row_mask, calibrate_weights(a, assignment, strength, key_allowed), a)``

and the model carries on (``a_hat @ V``, output projection, later layers). It
shares only the assignment and :func:`~llamaindex_posfair.calibration.math.calibrate_weights`
with the fast backend, never its basket-state merge.

The softmax is found generically (:func:`find_softmax_sites`, no per-model paths), and the keys a row may
attend to are read from the softmax's own input; how: docs/backends.md, "reference".
"""

from __future__ import annotations

import re
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from llamaindex_posfair.calibration.baskets import BasketAssignment
from llamaindex_posfair.calibration.config import layer_strength_map
from llamaindex_posfair.calibration.math import calibrate_weights

#: Call labels (nnsight's ``{callable}_{n}``) that run an attention implementation.
_INTERFACE_PATTERN = re.compile(r"^(?:\w*attention_interface|\w*attention_forward|\w*attn_func)_\d+$")
_SOFTMAX_PATTERN = re.compile(r"softmax", re.IGNORECASE)
_ATTENTION_CLASS = re.compile(r"(Attention|Attn)", re.IGNORECASE)


class SoftmaxSiteNotFound(RuntimeError):
    """The model's attention does not expose a post-softmax tensor the reference can rewrite."""


@dataclass(frozen=True)
class SoftmaxSite:
    """Where one layer's post-softmax attention weights appear.

    Attributes:
        layer: layer index (the module's ``layer_idx``, or its position).
        module_name: the attention module's name inside the transformers model.
        op: nnsight operation label in that module's ``forward``: the attention
            interface call to drill into (``drill=True``) or the softmax call itself.
        drill: whether the softmax lives inside the called function.
    """

    layer: int
    module_name: str
    op: str
    drill: bool


def _forward_ops(module: torch.nn.Module) -> tuple[tuple[str, ...], dict[str, int], str] | None:
    """Operation labels, label lines and source of ``module``'s class ``forward`` (nnsight's view)."""
    from nnsight.intervention.source import SourceNotAvailable, compiled, decorator_chain

    forward = type(module).forward
    try:
        inner, _ = decorator_chain(forward)
        result = compiled(inner)
    except (SourceNotAvailable, SyntaxError, TypeError, OSError):
        return None
    return result.names, result.lines, result.source


def _is_call(label: str, lines: dict[str, int], source: str) -> bool:
    """Whether ``label`` marks a call (``f(...)``) rather than an assignment to ``f``.

    nnsight numbers calls and assignments of one name with one counter
    (``attention_interface = ...`` is ``attention_interface_0``, the call
    ``attention_interface(...)`` is ``attention_interface_1``); the label's source
    line tells them apart.
    """
    text = source.split("\n")
    line = lines.get(label, 0) - 1
    if not 0 <= line < len(text):
        return False
    name = re.escape(label.rsplit("_", 1)[0]).replace("_", "[._]")
    called = re.search(rf"{name}\s*\(", text[line]) is not None
    assigned = re.search(rf"{name}\s*(:[^=]*)?=(?!=)", text[line]) is not None
    return called and not assigned


def find_softmax_sites(hf_model: torch.nn.Module) -> list[SoftmaxSite]:
    """List every attention layer's softmax site, in module order.

    Args:
        hf_model: a transformers ``PreTrainedModel`` (or any ``nn.Module``).

    Returns:
        One :class:`SoftmaxSite` per attention module, sorted by layer index.

    Raises:
        SoftmaxSiteNotFound: no module calls an attention interface or a softmax.

    Example:
        >>> sites = find_softmax_sites(hf_model)  # doctest: +SKIP
        >>> [(s.layer, s.op) for s in sites][:1]  # doctest: +SKIP
        [(0, 'attention_interface_1')]
    """
    found: list[tuple[int | None, str, str, bool]] = []
    cache: dict[type, tuple | None] = {}
    for name, module in hf_model.named_modules():
        cls = type(module)
        if cls not in cache:
            cache[cls] = _forward_ops(module)
        ops = cache[cls]
        if ops is None:
            continue
        names, lines, source = ops
        calls = [n for n in names if _INTERFACE_PATTERN.match(n) and _is_call(n, lines, source)]
        if calls:
            found.append((getattr(module, "layer_idx", None), name, calls[-1], True))
            continue
        softmax = [n for n in names if _SOFTMAX_PATTERN.search(n)]
        if softmax and _ATTENTION_CLASS.search(cls.__name__):
            found.append((getattr(module, "layer_idx", None), name, softmax[0], False))
    if not found:
        raise SoftmaxSiteNotFound(
            f"{type(hf_model).__name__} has no attention module whose forward calls an attention interface "
            "or a softmax, so the reference backend cannot reach its post-softmax weights; "
            'use backend="fast" instead'
        )
    sites = [
        SoftmaxSite(layer=int(idx) if idx is not None else pos, module_name=name, op=op, drill=drill)
        for pos, (idx, name, op, drill) in enumerate(found)
    ]
    layers = [s.layer for s in sites]
    if len(set(layers)) != len(layers):
        raise SoftmaxSiteNotFound(
            f"found several attention modules per layer in {type(hf_model).__name__} "
            f"({[s.module_name for s in sites]}); the reference backend expects one self-attention per layer. "
            'Use backend="fast" instead'
        )
    return sorted(sites, key=lambda s: s.layer)


def _softmax_op(site: SoftmaxSite, envoy: Any) -> Any:
    """The nnsight operation whose output is ``site``'s post-softmax weights (inside a trace)."""
    op = getattr(envoy.source, site.op)
    if not site.drill:
        return op
    inner = op.source  # instruments the attention function actually called (eager_attention_forward)
    labels = [n for n in inner.names if _SOFTMAX_PATTERN.search(n)]
    if not labels:
        raise SoftmaxSiteNotFound(
            f"the attention function called by {site.module_name} ({site.op}) has no softmax operation "
            f"(its operations: {', '.join(inner.names)}); the model is probably not running eager attention. "
            'ReferenceBackend.install() switches it to "eager"; otherwise use backend="fast"'
        )
    return getattr(inner, labels[0])


def _edit_weights(
    scores: torch.Tensor, weights: torch.Tensor, assignment: BasketAssignment, strength: float
) -> torch.Tensor:
    """``where(row_mask, calibrate_weights(a), a)`` for one layer's ``[B, H, L, L]`` weights.

    ``strength`` is the layer's ``lambda``; the assignment scales it per sequence
    (length-aware strength) and says how content baskets share mass (``assignment.weighting``).
    """
    batch, _, q_len, length = weights.shape
    if assignment.basket_ids.shape != (batch, length) or q_len != length:
        raise RuntimeError(
            "the reference backend expects one full forward pass over the assigned batch "
            f"(assignment {tuple(assignment.basket_ids.shape)}, attention weights {tuple(weights.shape)}); "
            "it does not support KV caches, generation or attention sinks"
        )
    if scores.dtype.is_floating_point:
        allowed = scores > torch.finfo(scores.dtype).min / 2
    else:  # pragma: no cover - softmax inputs are floating point
        allowed = torch.ones_like(weights, dtype=torch.bool)
    lam = assignment.strength(strength).to(weights.device)  # [B]
    rows = assignment.row_mask
    per_sequence = rows.sum(-1)
    if assignment.all_rows or int(per_sequence.max()) > 1:
        edited = calibrate_weights(weights, assignment, lam, key_allowed=allowed, basket_weighting=assignment.weighting)
        return torch.where(rows.view(batch, 1, q_len, 1), edited, weights)
    # One pooling row per sequence: calibrate_weights is row-wise, so calibrating the
    # gathered row and writing it back is the same ``where(row_mask, ...)``.
    index = rows.float().argmax(-1).view(batch, 1, 1, 1)
    heads = weights.shape[1]
    row = weights.gather(2, index.expand(batch, heads, 1, length))
    row_allowed = allowed.gather(2, index.expand(batch, allowed.shape[1], 1, length))
    edited = calibrate_weights(row, assignment, lam, key_allowed=row_allowed, basket_weighting=assignment.weighting)
    has_row = (per_sequence > 0).view(batch, 1, 1, 1)
    out = weights.clone()
    out.scatter_(2, index.expand(batch, heads, 1, length), torch.where(has_row, edited, row))
    return out


class ReferenceBackend:
    """Calibrates by rewriting eager attention's post-softmax weights with nnsight.

    Slow (every layer materialises ``L x L`` weights per head, and calibrated
    layers several more), so it is a check, not a production path: use
    :class:`~llamaindex_posfair.backends.fast.FastBackend` (``backend="fast"``,
    the default) to encode. Both backends take the same
    :class:`~llamaindex_posfair.calibration.baskets.BasketAssignment` and agree within
    float tolerance (``tests/backends/test_reference_backend.py``).

    Raises:
        SoftmaxSiteNotFound: (from :meth:`forward`) the model's attention does not
            expose a softmax; the message suggests ``backend="fast"``.
        ValueError: a requested layer has no attention site.

    Example:
        >>> from llamaindex_posfair import PosFairEncoder, CalibrationConfig, BUNDLED_MINILM
        >>> ref = PosFairEncoder(BUNDLED_MINILM, calibration=CalibrationConfig(), backend="reference")
        >>> ref.encode_documents(["A long passage ..."]).shape
        (1, 384)
    """

    name = "reference"

    def __init__(self) -> None:
        self._wrapped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def install(self, model: torch.nn.Module) -> None:
        """Switch ``model`` (a transformers ``PreTrainedModel``) to eager attention.

        Raises:
            SoftmaxSiteNotFound: the model has no attention softmax to rewrite.
        """
        find_softmax_sites(model)  # fail before changing anything
        model.set_attn_implementation("eager")

    def _tracer_for(self, st_model: torch.nn.Module):
        """The nnsight wrapper of ``st_model`` and its sites by layer (built once per model)."""
        entry = self._wrapped.get(st_model)
        if entry is not None:
            return entry
        from nnsight import NNsight

        hf_model = _transformers_model(st_model)
        sites = find_softmax_sites(hf_model)
        names = dict(hf_model.named_modules())
        with warnings.catch_warnings():  # BERT's submodules named "output" shadow nnsight's .output
            warnings.simplefilter("ignore", UserWarning)
            root = NNsight(st_model)
        envoys = {site.layer: (site, root.interleaver.envoys[id(names[site.module_name])]) for site in sites}
        entry = (root, envoys)
        self._wrapped[st_model] = entry
        return entry

    def forward(
        self,
        st_model,
        features: dict,
        assignment: BasketAssignment | None,
        layers: tuple[int, ...],
        strength: float | dict[int, float],
    ):
        """Run the sentence-transformers forward, calibrating ``layers`` when ``assignment`` is given.

        Args:
            st_model: the ``SentenceTransformer`` whose transformers model was installed.
            features: tokenised batch (``input_ids``, ``attention_mask``, ...).
            assignment: the batch's basket assignment, or ``None`` for a plain forward.
            layers: calibrated layer indices (non-negative).
            strength: ``lambda`` in ``[0, 1]``, or a ``{layer: lambda}`` map (strength
                schedules; layers missing from the map are not calibrated).

        Returns:
            The sentence-transformers output dict (``sentence_embedding``, ...).

        Raises:
            ValueError: a layer in ``layers`` has no attention site.
            SoftmaxSiteNotFound: an attention function has no softmax (not eager).
        """
        if assignment is None:
            return st_model(features)
        import nnsight

        root, envoys = self._tracer_for(st_model)
        strengths = layer_strength_map(layers, strength)
        missing = sorted(set(strengths) - set(envoys))
        if missing:
            raise ValueError(
                f"layers {missing} have no attention module; the model's attention layers are {sorted(envoys)}"
            )
        assignment = assignment.to(features["input_ids"].device)
        targets = [(*envoys[layer], strengths[layer]) for layer in sorted(strengths)]
        with root.trace(dict(features)):
            for site, envoy, lam in targets:
                op = _softmax_op(site, envoy)
                scores = op.input
                op.output = _edit_weights(scores, op.output, assignment, lam)
            result = nnsight.save(root.output)
        return result


def _transformers_model(st_model: torch.nn.Module) -> torch.nn.Module:
    for module in st_model.modules():
        model = getattr(module, "auto_model", None)
        if isinstance(model, torch.nn.Module):
            return model
    return st_model
