"""May this encoder read or write this collection? The one gate of the store, the retriever, the reranker,
``posfair query`` and ``posfair serve --collection``: a :class:`Gate` holds a vector's recorded spec and
fingerprint, and one rule. An encoder (an ``EncoderSpec``, or anything carrying one as ``.spec``) may read the
vector when its fingerprint is the stored one or differs in precision or inference runtime alone (noticed once:
rankings agree), and write it only in the stored precision and runtime; another LlamaIndex embedding, when its
vector of :data:`PROBE_TEXT` is the collection encoder's. A refusal names the collection, its encoder, the
refused one and the fix, before anything is written.

Example:
    >>> from llamaindex_posfair.encoders.spec import EncoderSpec
    >>> recorded = EncoderSpec(model="m", weights="w1", calibration=None, dtype="float32")
    >>> gate = Gate("docs", "vanilla", recorded, recorded.fingerprint())
    >>> gate.check_reader(recorded.model_copy(update={"dtype": "bfloat16"})).dtype  # with a notice
    'bfloat16'
    >>> gate.check_writer(recorded.model_copy(update={"dtype": "bfloat16"}))
    Traceback (most recent call last):
    ...
    llamaindex_posfair.integrations.gate.FingerprintMismatchError: vector 'vanilla' of collection 'docs' was written in float32, ...
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from llamaindex_posfair.calibration.config import CalibrationConfig
from llamaindex_posfair.encoders import precision
from llamaindex_posfair.encoders.precision import AUTO, precision_name, same_precision
from llamaindex_posfair.encoders.spec import VECTOR_FIELDS, EncoderSpec
from llamaindex_posfair.encoders.view import CalibrationView
from qdrant_tools import payload as P
from qdrant_tools.spec import CollectionMismatchError

if TYPE_CHECKING:
    from llamaindex_posfair.integrations.recipe import Recipe
    from qdrant_tools.store.protocol import StoreLike

__all__ = ["UNRECORDED_CALIBRATION", "FingerprintMismatchError", "Gate", "conflict", "contradiction", "settle"]

#: The text another LlamaIndex embedding and the collection's encoder both embed to show they are one model.
PROBE_TEXT = "The tide rises twice a day; a lighthouse keeper logs its height at dawn and at dusk."
#: Two vectors of one text are one encoder's at this cosine or above (another precision or batch of one model
#: stays above 0.9999: research/bench/batch_rounding.py).
SAME_ENCODER_COSINE = 0.99
#: The recorded fields a reader may change: they round the same vectors differently.
ROUNDING_FIELDS = ("dtype", "runtime")
#: The calibration that reads a collection written before recipes when none is given: the default of that time
#: (calibrated); :meth:`Gate.check_reader` reads a plain vector there with the encoder's plain view.
UNRECORDED_CALIBRATION = CalibrationConfig()


class FingerprintMismatchError(CollectionMismatchError):
    """The encoder did not write the vector (or, for a writer, computes it in another precision or runtime)."""


def settle(
    recorded: EncoderSpec,
    given: Mapping[str, Any] | None = None,
    *,
    names: Mapping[str, str] | None = None,
    read: bool = False,
    where: str = "the collection",
) -> EncoderSpec:
    """``recorded`` with the caller's ``given`` fields (flags, keywords): recorded fields must agree (else a
    ``CollectionMismatchError`` names both values, the field as ``names`` say), run-time fields are applied, the
    weights stay recorded. A reader's (``read``) dtype and runtime are its own (the dtype ``"auto"`` when not
    given); a writer's given dtype must be the recorded precision."""
    given = dict(given or {})
    if "dtype" in given or read:  # a dtype of the recorded precision is the recorded value (None: float32)
        dtype = given.get("dtype", AUTO)
        same = dtype != AUTO and same_precision(EncoderSpec(dtype=dtype).dtype, recorded.dtype)
        given["dtype"] = recorded.dtype if same else dtype
    fields = {**recorded.model_dump(), **given, "weights": recorded.weights}
    # each setting is compared with the record before the settings are checked together (a calibration given
    # for a collection written on an exported runtime contradicts its record); torch runs every setting
    alone = EncoderSpec.model_validate({**fields, "runtime": "torch"})
    free = {"weights", *ROUNDING_FIELDS} if read else {"weights"}
    for field in VECTOR_FIELDS:
        value = fields["runtime"] if field == "runtime" else getattr(alone, field)
        if field in given and field not in free and value != getattr(recorded, field):
            raise CollectionMismatchError(conflict(where, field, getattr(recorded, field), value, names))
    return EncoderSpec.model_validate(fields)


def conflict(where: str, field: str, stored: Any, given: Any, names: Mapping[str, str] | None = None) -> str:
    """The message of a setting that contradicts what ``where`` records: ``field``'s two values, and the fix."""
    setting = (names or {}).get(field, field)
    return contradiction(where, f"{field} {_shown(stored)}", setting, _shown(given))


def contradiction(where: str, stored: str, setting: str, given: str) -> str:
    """``where`` was written with ``stored``, but ``setting`` gives ``given``, and the fix."""
    return (
        f"{where} was written with {stored}, but {setting} gives {given}; "
        f"drop {setting} to use the collection's, or write a new collection"
    )


@dataclasses.dataclass(frozen=True)
class Gate:
    """Who may read or write ``vector`` of ``collection``: ``recorded`` is its recipe's spec (``None``: written
    before recipes), ``stored`` its points' fingerprint, else the recorded spec's (``None``: none yet)."""

    collection: str
    vector: str
    recorded: EncoderSpec | None = None
    stored: str | None = None

    @classmethod
    def of(
        cls, collection: str, recipe: Recipe | None, vector: str | None = None, client: StoreLike | None = None
    ) -> Gate:
        """The gate of ``vector`` (default: the recipe's searched one; else ``ValueError``); ``client`` reads the
        fingerprint its points record (else the recipe's spec gives it)."""
        name = recipe.node_vector(vector) if recipe is not None else vector
        recorded = recipe.vectors[name] if recipe is not None else None
        exists = client is not None and client.collection_exists(collection)
        points = client.scroll(collection, limit=1, with_payload=P.payload_fields(P.FINGERPRINTS))[0] if exists else []
        stored = P.posfair_fields(points[0].payload).get(P.FINGERPRINTS, {}).get(name) if points else None
        if stored is None and recorded is not None:
            stored = _fingerprint(recorded)
        return cls(collection, name, recorded, stored)

    @property
    def where(self) -> str:
        return f"vector {self.vector!r} of collection {self.collection!r}"

    def spec(self, given: Mapping[str, Any] | None = None, *, names: Mapping[str, str] | None = None) -> EncoderSpec:
        """The recorded spec with a reader's ``given`` fields (:func:`settle`; ``names``: their flags)."""
        if self.recorded is None:
            raise CollectionMismatchError(f"collection {self.collection!r} records no recipe to read an encoder from")
        return settle(self.recorded, given, names=names, read=True, where=f"collection {self.collection!r}")

    def check_reader(self, candidate: Any, *, own: Callable[[], Any] | None = None, who: str = "") -> Any:
        """Admit ``candidate`` (an ``EncoderSpec``, a loaded encoder, a ``PosFairEmbedding``; another LlamaIndex
        embedding with ``own``, which loads the collection's encoder) to read, or raise a
        ``CollectionMismatchError`` naming it as ``who``. Returns what reads: ``candidate``, or in a collection
        without a recipe the plain view of a calibrated encoder that wrote a plain vector."""
        return self._check(candidate, False, own, who)

    def check_writer(self, candidate: Any, *, own: Callable[[], Any] | None = None, who: str = "") -> None:
        """:meth:`check_reader` for a writer, in the stored precision and runtime only (else it raises)."""
        self._check(candidate, True, own, who)

    def check_embedding(self, own: Any, texts: Sequence[str], embedding: Any, what: str, query: bool = False) -> None:
        """Raise ``CollectionMismatchError`` unless an app's ``embedding`` (of ``what``) is ``own``'s (the collection
        encoder's) vector of one of ``texts`` (the ways the app may have embedded it): same size, cosine at least
        :data:`SAME_ENCODER_COSINE`."""
        encode = own.encode_queries if query else own.encode_documents
        for text in texts[:-1]:
            with contextlib.suppress(CollectionMismatchError):
                return self._same_vectors("the index's embed model", encode([text])[0], embedding, what)
        self._same_vectors("the index's embed model", encode([texts[-1]])[0], embedding, what)

    def _check(self, candidate: Any, write: bool, own: Callable[[], Any] | None, who: str) -> Any:
        spec = candidate if isinstance(candidate, EncoderSpec) else getattr(candidate, "spec", None)
        if not isinstance(spec, EncoderSpec):
            if own is None:
                raise TypeError(f"{type(candidate).__name__} is not an EncoderSpec, an encoder or an embedding")
            given = candidate.get_text_embedding(PROBE_TEXT)
            expected = own().encode_documents([PROBE_TEXT])[0]
            self._same_vectors(_name(candidate), expected, given, "one text")
            return candidate
        who = who or ("the encoder spec given" if candidate is spec else "the encoder given")
        if self._admits(spec, write, who):
            return candidate
        if self.recorded is None and spec.calibration is not None and hasattr(candidate, "count_tokens"):
            plain = CalibrationView(candidate, None)  # nothing records the calibration a reader should use
            if self._admits(plain.spec, write, who):
                return plain
        raise FingerprintMismatchError(self._refusal(spec, who))

    def _admits(self, spec: EncoderSpec, write: bool, who: str) -> bool:
        fingerprint = _fingerprint(spec)
        if self.stored is None or fingerprint is None:  # nothing to hash: the recorded fields decide
            return self.recorded is None or not _differences(self.recorded, spec)
        if fingerprint == self.stored:
            return True
        twin, used = spec.precision_twin(self.stored), spec.pinned()  # the same spec in another rounding?
        if twin is None or (twin.runtime == used.runtime and same_precision(twin.dtype, used.dtype)):
            return twin is not None  # the same precision recorded otherwise (None, as saved, is float32)
        if write:
            raise FingerprintMismatchError(
                f"{self.where} was written in {_rounding(twin)}, but {who} computes {_rounding(used)}; writing would "
                f"mix two roundings in one collection. Write with dtype={precision_name(twin.dtype)!r}, "
                f"runtime={twin.runtime!r} (reading with either is accepted), or write a new collection"
            )
        if twin.runtime != used.runtime:
            precision.notice_runtime_difference(self.where, (twin.runtime, twin.dtype), (used.runtime, used.dtype))
        else:
            precision.notice_precision_difference(self.where, twin.dtype, used.dtype)
        return True

    def _same_vectors(self, model: str, expected: Any, given: Any, what: str) -> None:
        """Raise unless ``given`` (``model``'s vector of ``what``) is ``expected`` (the collection encoder's)."""
        a, b = np.asarray(expected, dtype=np.float64).ravel(), np.asarray(given, dtype=np.float64).ravel()
        encoder = "an unrecorded encoder" if self.recorded is None else str(self.recorded.model)
        fix = (
            f"embed with the collection's encoder (PosFairEmbedding(model_name={encoder!r}) or the same model), "
            "or write a new collection for this model"
        )
        if a.shape != b.shape:
            raise CollectionMismatchError(
                f"embed model {model} gives {b.size}-dimensional vectors, but collection {self.collection!r} holds "
                f"{a.size}-dimensional vectors of {encoder}; {fix}"
            )
        cosine = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
        if cosine < SAME_ENCODER_COSINE:
            raise CollectionMismatchError(
                f"embed model {model} is not the encoder of collection {self.collection!r} ({encoder}): their "
                f"vectors of {what} have cosine {cosine:.3f} (the same encoder gives >= {SAME_ENCODER_COSINE}); "
                f"nothing was written. {fix[0].upper()}{fix[1:]}"
            )

    def _refusal(self, spec: EncoderSpec, who: str) -> str:
        written = f"an encoder with fingerprint {self.stored}" if self.recorded is None else _described(self.recorded)
        diff = "; ".join(_differences(self.recorded, spec)) if self.recorded is not None else ""
        return (
            f"{self.where} was written by {written}, but {who} is "
            f"{_described(spec)}{f' (it differs in {diff})' if diff else ''}; use the encoder the collection was "
            "written with (its model files, calibration, prompts and max length: the flags used at ingest time), "
            "or write a new collection for this encoder"
        )


def _fingerprint(spec: EncoderSpec) -> str | None:
    """``spec``'s fingerprint (``None``: its weights cannot be read here, a hub model not downloaded)."""
    with contextlib.suppress(ValueError):
        return spec.fingerprint()
    return None


def _differences(recorded: EncoderSpec, spec: EncoderSpec) -> list[str]:
    """``"field: recorded -> given"`` of the differing vector fields but the rounding ones (weights where known)."""
    pairs = ((f, getattr(recorded, f), getattr(spec, f)) for f in VECTOR_FIELDS if f not in ROUNDING_FIELDS)
    return [
        f"{f}: {_shown(a)} -> {_shown(b)}" for f, a, b in pairs if a != b and not (f == "weights" and None in (a, b))
    ]


def _rounding(spec: EncoderSpec) -> str:
    return precision_name(spec.dtype) + ("" if spec.runtime == "torch" else f" on {spec.runtime}")


def _described(spec: EncoderSpec) -> str:
    """``spec.describe()``, without the fingerprint where its weights cannot be read here."""
    cal = "plain" if spec.calibration is None else f"calibrated {spec.calibration.fingerprint()}"
    return f"{spec.model} ({cal}" + (f", fingerprint {fp})" if (fp := _fingerprint(spec)) else ")")


def _shown(value: Any) -> str:
    """A readable form of a setting (a calibration config as its main settings; None as "none")."""
    if isinstance(value, CalibrationConfig):
        return f"(basket_size={value.basket_size}, strength={value.strength}, layers={value.layers})"
    return "none" if value is None else repr(value)


def _name(embed: Any) -> str:
    name = getattr(embed, "model_name", None)
    return f"{type(embed).__name__}({name!r})" if name else type(embed).__name__
