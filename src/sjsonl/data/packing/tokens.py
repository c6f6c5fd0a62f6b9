"""How a record becomes the token ids of one document — the same rule for the length pass and for reading.

A document is ``record[column]`` (or ``column(record)`` when ``column`` is a function), and is one of:

- a string: tokenized by ``tokenizer`` — a 🤗 fast tokenizer (``PreTrainedTokenizerFast``/``AutoTokenizer``;
  its Rust ``encode_batch`` is called directly, in parallel), a ``tokenizers.Tokenizer``, a slow 🤗
  tokenizer, or any function ``str -> list[int]``;
- a list of token ids (``column="input_ids"``): taken as they are, nothing is tokenized;
- a dict with ``"input_ids"`` and optionally ``"labels"`` (the same length; ``-100`` masks a token from the
  loss), e.g. what a chat template with an assistant mask gives.

Special tokens: ``add_special_tokens=True`` (as 🤗) lets the tokenizer's post-processor add what it adds (a
BOS for Llama-style tokenizers, nothing for GPT-2-style ones). **EOS**: ``eos_token_id`` (by default the 🤗
tokenizer's ``eos_token_id``; ``None`` for other tokenizers and ready ids) is appended to every document that
does not already end with it, with itself as its label — so a model learns where documents end; pass
``eos_token_id=None`` for none.

A document's identity for the length cache (:attr:`DocumentTokens.identity`) is a digest of the tokenizer's
full serialization (vocabulary, merges, normalizer, post-processor) with the column and these rules; a
function tokenizer or column has none unless the caller names its version with ``cache_key=``.

Example:
    >>> rule = DocumentTokens(lambda s: [len(w) for w in s.split()], "text", eos_token_id=0)
    >>> rule.encode([{"text": "hi there"}, {"text": "x"}])
    [([2, 5, 0], None), ([1, 0], None)]
    >>> DocumentTokens(None, "ids").encode([{"ids": [7, 8]}]), rule.identity is None
    ([([7, 8], None)], True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from sjsonl.errors import ColumnNotFoundError, InvalidArgumentError

#: ``eos_token_id``'s default: the 🤗 tokenizer's own EOS (none for other tokenizers).
FROM_TOKENIZER: Any = object()
#: Version of the rules above: part of every cache key, so a change of rule is a new key.
RULES_VERSION = 1

Encoded = tuple[list[int], "list[int] | None"]  # ids, labels (None: the ids are the labels)


class DocumentTokens:
    """The token ids of records' documents (see the module for the rules).

    Args:
        tokenizer: a 🤗 tokenizer, a ``tokenizers.Tokenizer``, a function ``str -> list[int]``, or ``None``
            when the documents are token ids already.
        column: the field holding each document, or a function ``record -> str | list[int] | dict``.
        add_special_tokens: let the tokenizer add its special tokens (BOS, …), as 🤗's ``tokenizer(text)``.
        eos_token_id: appended to every document not already ending with it; the default takes the 🤗
            tokenizer's, ``None`` appends nothing.
        cache_key: names a function tokenizer or column (its version), so their lengths can be cached.
    """

    def __init__(
        self,
        tokenizer: Any,
        column: str | Callable[[Any], Any] = "text",
        *,
        add_special_tokens: bool = True,
        eos_token_id: int | None = FROM_TOKENIZER,
        cache_key: str | None = None,
    ) -> None:
        if not (isinstance(column, str) or callable(column)):
            raise InvalidArgumentError(f"column must be a field name or a function, not {column!r}")
        self.tokenizer, self.column, self.add_special_tokens = tokenizer, column, bool(add_special_tokens)
        self._backend = _fast_backend(tokenizer)
        if eos_token_id is FROM_TOKENIZER:
            eos_token_id = (
                getattr(tokenizer, "eos_token_id", None) if self._backend is not tokenizer else None
            )
        if eos_token_id is not None and (isinstance(eos_token_id, bool) or not isinstance(eos_token_id, int)):
            raise InvalidArgumentError(f"eos_token_id must be an int or None, not {eos_token_id!r}")
        self.eos_token_id: int | None = eos_token_id
        self.cache_key = cache_key
        self._batch = self._batch_encoder()

    def _batch_encoder(self) -> Callable[[list[str]], list[list[int]]] | None:
        tok, special = self.tokenizer, self.add_special_tokens
        if tok is None:
            return None
        if self._backend is not None:  # Rust, all cores, the GIL released
            backend = self._backend
            return lambda texts: [e.ids for e in backend.encode_batch(texts, add_special_tokens=special)]
        if hasattr(tok, "batch_encode_plus") or hasattr(tok, "pad_token_id"):  # a slow 🤗 tokenizer
            return lambda texts: list(tok(texts, add_special_tokens=special)["input_ids"])
        if not callable(tok):
            raise InvalidArgumentError(
                f"tokenizer must be a 🤗 tokenizer or a function, not {type(tok).__name__}"
            )
        return lambda texts: [list(tok(t)) for t in texts]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_batch": None}  # (a closure: made again where it is unpickled)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._batch = self._batch_encoder()

    @property
    def identity(self) -> dict[str, Any] | None:
        """What the token lengths depend on, or ``None`` when that cannot be known (a function without
        ``cache_key``)."""
        tok = self.tokenizer
        if self.cache_key is not None:
            which: Any = ["key", self.cache_key]
        elif self._backend is not None:
            which = ["tokenizers", hashlib.sha256(self._backend.to_str().encode()).hexdigest()]
        elif tok is None:
            which = None
        else:
            return None
        if callable(self.column) and self.cache_key is None:
            return None
        column = self.column if isinstance(self.column, str) else "function"
        return {
            "rules": RULES_VERSION,
            "tokenizer": which,
            "column": column,
            "special": self.add_special_tokens,
            "eos": self.eos_token_id,
        }

    def documents(self, records: Sequence[Any]) -> list[Any]:
        """Each record's document (its column's value)."""
        column = self.column
        if callable(column):
            return [column(r) for r in records]
        out = []
        for r in records:
            try:
                out.append(r[column])
            except (KeyError, TypeError, IndexError):
                kind = "object" if isinstance(r, dict) else type(r).__name__
                raise ColumnNotFoundError(
                    f"a record has no column {column!r} to pack (a JSON {kind}"
                    + (f" with keys {list(r)[:8]}" if isinstance(r, dict) else "")
                    + ")"
                ) from None
        return out

    def encode(self, records: Sequence[Any]) -> list[Encoded]:
        """Each record's ``(ids, labels)`` (labels ``None``: the same as the ids), EOS appended."""
        docs = self.documents(records)
        texts = [(i, d) for i, d in enumerate(docs) if isinstance(d, str)]
        out: list[Any] = [None] * len(docs)
        if texts:
            if self._batch is None:
                raise InvalidArgumentError(
                    f"documents are text: pack(..., tokenizer=) is needed to tokenize {texts[0][1][:40]!r}"
                )
            for (i, _), ids in zip(texts, self._batch([t for _, t in texts])):
                out[i] = (list(ids), None)
        for i, d in enumerate(docs):
            if out[i] is None:
                out[i] = _ready(d)
        eos = self.eos_token_id
        if eos is not None:
            for ids, labels in out:
                if not ids or ids[-1] != eos:
                    ids.append(eos)
                    if labels is not None:
                        labels.append(eos)
        return out

    def lengths(self, records: Sequence[Any]) -> list[int]:
        """Each record's document length in tokens (EOS included)."""
        return [len(ids) for ids, _ in self.encode(records)]


def _fast_backend(tokenizer: Any) -> Any:
    """The Rust tokenizer behind a 🤗 fast tokenizer, the ``tokenizers.Tokenizer`` itself, else ``None``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "encode_batch"):
        return backend
    if type(tokenizer).__module__.startswith("tokenizers") and hasattr(tokenizer, "encode_batch"):
        return tokenizer
    return None


def _ready(doc: Any) -> Encoded:
    """A document given as token ids (a list, or a dict with ``input_ids`` and maybe ``labels``)."""
    if isinstance(doc, dict):
        if "input_ids" not in doc:
            raise InvalidArgumentError(
                f"a document given as a dict needs 'input_ids', got keys {list(doc)[:8]}"
            )
        ids, labels = _ids(doc["input_ids"]), doc.get("labels")
        if labels is not None:
            labels = _ids(labels, "labels")
            if len(labels) != len(ids):
                raise InvalidArgumentError(
                    f"labels ({len(labels)}) and input_ids ({len(ids)}) differ in length"
                )
        return ids, labels
    return _ids(doc), None


def _ids(value: Any, what: str = "token ids") -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        shown = repr(value)[:60]
        raise InvalidArgumentError(f"a document must be text or a list of integer {what}, not {shown}")
    return list(value)
