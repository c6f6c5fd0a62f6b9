"""The mutants of ``run.py``: one-line bugs, each with the tests that must catch it (a short selection, so a
mutant runs in about a minute). ``old`` must occur exactly once in ``file``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str  # the behaviour the bug breaks
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    shared_data: bool = True  # False: run without ../shared/data (a mutant that could write into it)


MUTANTS = [
    Mutant(
        "readahead-noop",
        "read-ahead hints nothing",
        "src/sjsonl/data/readahead.py",
        "        if not self.on:\n            return\n",
        "        if True:\n            return\n",
        ("tests/test_readahead.py",),
    ),
    Mutant(
        "readahead-current-window",
        "read-ahead hints the window being read instead of the next one",
        "src/sjsonl/data/readahead.py",
        "            hint(local, s[nxt : nxt + window], e[nxt : nxt + window])",
        "            hint(local, s[lo:nxt], e[lo:nxt])",
        ("tests/test_readahead.py",),
    ),
    Mutant(
        "permutation-keys",
        "the shuffle order changes (another key derivation): every saved run is reordered",
        "src/sjsonl/sampling/permutation.py",
        'material = f"sjsonl.Permutation/v2/n={n}/seed={int(seed)}/epoch={int(epoch)}".encode()',
        'material = f"sjsonl.Permutation/v2/n={n}/seed={int(seed)}/epoch={int(epoch) + 0 * n}/".encode()',
        ("tests/test_permutation.py", "tests/test_cli_stats.py"),
    ),
    Mutant(
        "block-shuffle-window-seed",
        "the block shuffle's windows are keyed differently: every block-shuffled run is reordered",
        "src/sjsonl/sampling/block.py",
        'material = f"sjsonl.BlockShuffle/v1/seed={seed}/epoch={epoch}/window={window}".encode()',
        'material = f"sjsonl.BlockShuffle/v1/seed={seed}/epoch={epoch}/window={window + 1}".encode()',
        ("tests/test_block_shuffle.py",),
    ),
    Mutant(
        "sampler-drop-last-ignored",
        "DistributedSampler(drop_last=True) pads instead of cutting",
        "src/sjsonl/sampling/distributed.py",
        "    return n // num_replicas if drop_last else -(-n // num_replicas)",
        "    return -(-n // num_replicas)",
        ("tests/test_torch_sampler.py::test_golden_rank_orders",),
    ),
    Mutant(
        "sampler-resume-off-by-one",
        "a resumed pass skips the record after the saved position",
        "src/sjsonl/sampling/elastic.py",
        "        return epoch, yielded, consumed, skipped",
        "        return epoch, yielded + 1, consumed, skipped",
        ("tests/test_torch_sampler.py", "tests/test_resume_states.py"),
    ),
    Mutant(
        "cursor-resume-off-by-one",
        "a resumed prefetch (or MindSpore batch) pass skips the item after the saved position",
        "src/sjsonl/sampling/distributed.py",
        "            self.resume_at(epoch, yielded)",
        "            self.resume_at(epoch, yielded + 1)",
        ("tests/test_prefetch.py", "tests/test_resume_states.py"),
    ),
    Mutant(
        "fill-missing-ignored",
        "load_dataset(fill_missing=True) returns records without the missing columns",
        "src/sjsonl/hf/load.py",
        "        elif fill_missing:",
        "        elif False:",
        ("tests/test_hf_differential.py", "-k", "missing and keys"),
    ),
    Mutant(
        "decode-loses-big-ints",
        "the record decoder turns integers beyond 64 bits into floats (orjson)",
        "src/sjsonl/records/decode.py",
        "fast_loads = msgspec.json.Decoder().decode",
        'fast_loads = __import__("orjson").loads',
        ("tests/test_decoder_agreement.py",),
    ),
    Mutant(
        "staleness-at-open-skipped",
        "an index whose data changed is used anyway",
        "src/sjsonl/index/build.py",
        '        if change is not None:\n            problems.append(f"index {path} is stale: {change}")',
        '        if False:\n            problems.append(f"index {path} is stale: {change}")',
        ("tests/test_index_files.py", "-k", "stale"),
    ),
    Mutant(
        "staleness-on-read-skipped",
        "reads never check that the file is still the version indexed (truncated or rewritten in place)",
        "src/sjsonl/storage/local.py",
        "        if pinned is None or state == self._accepted:\n            return",
        "        if True:\n            return",
        ("tests/test_hostile_paths.py", "tests/test_readahead.py"),
    ),
    Mutant(
        "content-hash-check-skipped",
        "a same-size rewrite under an open dataset is not told by the content hash (storage/local.py)",
        "src/sjsonl/storage/local.py",
        "            if content_hash(reader, pinned.stored) != pinned.content:",
        "            if False:",
        ("tests/test_changes_under_readers.py", "tests/test_pinning.py"),
    ),
    Mutant(
        "sigbus-guard-check-not-run",
        "the guarded map never runs its periodic version check",
        "src/sjsonl/storage/local.py",
        "        if alive is not None:\n            alive.check_unchanged()",
        "        if False:\n            alive.check_unchanged()",
        ("tests/test_changes_under_readers.py",),
    ),
    Mutant(
        "descriptor-budget-never-evicts",
        "the descriptor budget never takes a descriptor back",
        "src/sjsonl/storage/descriptors.py",
        "            victims = list(itertools.islice(self._open.values(), over * 2 + 4)) if over > 0 else []",
        "            victims = []",
        ("tests/test_descriptor_budget.py",),
    ),
    Mutant(
        "read-only-place-rule-off",
        "a directory without write bits gets an index anyway when root can write it",
        "src/sjsonl/storage/trust.py",
        '    if not st.st_mode & 0o222:\n        return f"{directory} is read-only',
        '    if False:\n        return f"{directory} is read-only',
        ("tests/test_index_write_failures.py", "tests/test_index_files.py"),
        shared_data=False,
    ),
    Mutant(
        "bad-line-skip-off-by-one",
        'on_bad_lines="skip" leaves out the record after each bad one',
        "src/sjsonl/records/badlines.py",
        "        bad = [a + k for k in range(b - a) if _is_bad(",
        "        bad = [a + k + 1 for k in range(b - a) if _is_bad(",
        ("tests/test_bad_lines.py",),
    ),
    Mutant(
        "index-write-not-atomic",
        "the index is written in place instead of to a temp file moved into place",
        "src/sjsonl/storage/atomic.py",
        '    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(path) or ".")',
        "    fd, tmp = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644), path",
        ("tests/test_index_files.py", "-k", "kill"),
    ),
    Mutant(
        "index-loses-last-record",
        "every file's index drops its last record",
        "src/sjsonl/data/source.py",
        "        self.n = len(loaded.offsets)",
        "        self.n = len(loaded.offsets) - 1",
        ("tests/test_decoder_agreement.py", "-k", "real_files or generated"),
    ),
    Mutant(
        "batches-shuffle-ignored",
        "ds.batch(n).shuffle(seed) returns the batches in file order",
        "src/sjsonl/data/views.py",
        "        if self._order is not None:\n            i = self._order[i]",
        "        if self._order is not None:\n            i = i",
        ("tests/test_decoder_agreement.py", "-k", "real_files or generated"),
    ),
    Mutant(
        "unknown-split-names-no-splits",
        "an unknown split's error no longer lists the splits there are",
        "src/sjsonl/hf/load.py",
        """            raise SplitError(f'Unknown split "{split}". Should be one of {list(sizes)}.')""",
        """            raise SplitError(f'Unknown split "{split}".')""",
        ("tests/test_hf_differential.py", "-k", "unknown"),
    ),
    Mutant(
        "missing-file-unnamed",
        "a missing data file's error no longer names the file",
        "src/sjsonl/hf/data_files.py",
        '            raise _not_found(f"no such data file: {where}")',
        '            raise _not_found("no such data file")',
        ("tests/test_hf_differential.py", "-k", "missing and file"),
    ),
    Mutant(
        "mindspore-json-text-not-compact",
        "MindSpore's JSON-text columns are no longer compact JSON (ASCII escapes, spaces)",
        "src/sjsonl/mindspore/columns.py",
        "        text = orjson.dumps(value)",
        "        text = json.dumps(value).encode()",
        ("tests/test_mindspore.py", "-k", "every_row"),
    ),
    Mutant(
        "shard-remainder-misplaced",
        "contiguous shards put the records left over in the last shards instead of the first",
        "src/sjsonl/data/views.py",
        "        start = div * index + min(index, mod)",
        "        start = div * index + max(0, index - (num_shards - mod))",
        ("tests/test_views.py", "-k", "huggingface"),
    ),
    Mutant(
        "batch-reads-reversed",
        "ds.__getitems__ (what a DataLoader calls per batch) returns the batch's records in reverse",
        "src/sjsonl/data/dataset.py",
        "        return self[indices]",
        "        return self[list(indices)[::-1]]",
        ("tests/test_trainers.py", "-k", "same_script"),
    ),
    Mutant(
        "iterable-shuffle-seed-off-by-one",
        "the 🤗-typed iterable's shuffle(seed) uses another seed",
        "src/sjsonl/data/transforms/iterable.py",
        "        return self._new(seed=seed)",
        "        return self._new(seed=seed + 1)",
        ("tests/test_trainers_trl.py", "-k", "iterable"),
    ),
    Mutant(
        "interleave-period-rotated",
        "an interleave's single-record path draws each period's sources in another order",
        "src/sjsonl/sampling/schedule.py",
        "        source = int(self._source[r])",
        "        source = int(self._source[(r + 1) % self.period])",
        ("tests/test_huge_lengths.py",),
    ),
    Mutant(
        "elastic-lockstep-off-by-one",
        "an elastic resume counts one position fewer as taken: a record is handed out twice",
        "src/sjsonl/sampling/elastic.py",
        "    through = min(prefix * num_replicas, m)",
        "    through = min(prefix * num_replicas - 1, m)",
        ("tests/test_elastic_resume.py",),
    ),
    Mutant(
        "elastic-merge-ignores-laggards",
        "merging a rank's worker states takes the furthest worker for the prefix: records are lost",
        "src/sjsonl/sampling/elastic.py",
        "    prefix = min(min(w + y * workers, share) for w, y in took.items())",
        "    prefix = max(min(w + y * workers, share) for w, y in took.items())",
        ("tests/test_elastic_resume.py",),
    ),
    Mutant(
        "resume-not-held",
        "a resume is used up by the iterator a multi-worker loader makes and drops",
        "src/sjsonl/sampling/distributed.py",
        "            self._resume = pending if hold else None",
        "            self._resume = None",
        ("tests/test_elastic_resume.py", "-k", "stateful"),
    ),
]
