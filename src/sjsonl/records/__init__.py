"""Records layer: bytes of one line → the Python object ``json.loads`` returns for it.

- :mod:`~sjsonl.records.decode` — exact decoding (big integers, NaN rules, duplicate keys);
- :mod:`~sjsonl.records.fields` — only some (nested) fields, or records of a declared type;
- :mod:`~sjsonl.records.schema` — every column's type, computed once and kept beside the index;
- :mod:`~sjsonl.records.badlines` — the lines that are not JSON, found once and skipped by number;
- :mod:`~sjsonl.records.conform` — rows as 🤗 gives them (every column in every row).
"""
