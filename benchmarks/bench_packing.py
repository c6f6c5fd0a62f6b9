"""Packing: sjsonl's ``ds.pack`` against 🤗 ``datasets`` + TRL's ``pack_dataset``, same corpus and tokenizer.

The corpus is the "long" benchmark corpus (≈2 KB per record: a ``text``, or chat turns whose contents make
the document; 64 MiB, ``--quick`` 8 MiB), the tokenizer a byte-level BPE of 8,000 tokens trained here on its
first 2,000 records (a 🤗 fast tokenizer). Measured:

- **first batch from a fresh process state**: sjsonl (index + token-length pass + plan + the first pack) vs
  🤗 (``load_dataset("json")`` into Arrow + ``map`` tokenization + EOS + TRL ``pack_dataset(strategy="bfd")``
  + its first row), each into its own empty cache directory, with the bytes each writes beside the data;
- **reopen**: the same ``pack`` again (index and lengths from their files), vs 🤗 loading its cached Arrow;
- **the length pass vs the tokenizer alone** (``encode_batch`` over the same texts);
- **a full pass over the packs** (tokens made when read) vs the tokenizer alone;
- **padding efficiency** (tokens ÷ packs × seq_len): sjsonl's BFD, first fit and wrapped vs TRL's BFD, on the
  same token lengths;
- **planning alone** on 1M and 10M lognormal lengths (median 300 tokens): time and peak memory (tracemalloc).

    python benchmarks/bench_packing.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, os.path.dirname(__file__))
from common import bench_main, corpus, figure

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sjsonl import JSONLDataset
from sjsonl.data.packing.plan import plan_packs

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]
SEQ_LEN = 2048
RUNS = 3


STREAM_WINDOW = 1000  # pack_stream's default window: TRL's map batch


def document(record: dict) -> str:
    """A record's text: its ``text``, or its chat turns' contents one per line."""
    if record.get("text") is not None:
        return record["text"]  # type: ignore[no-any-return]
    return "\n".join(m["content"] for m in record["messages"])


def _tokenizer(path: str) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    with open(path, "rb") as f:
        texts = [document(orjson.loads(next(f))) for _ in range(2000)]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=8000,
        special_tokens=["<unk>", "<pad>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>"
    )


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _bytes_under(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def _row(benchmark: str, variant: str, seconds: float, base: float | None, note: str = "") -> dict:
    ratio = f"{seconds / base:.2f}x" if base else ""
    return {
        "benchmark": benchmark,
        "variant": variant,
        "median": f"{seconds:.3f} s",
        "ratio": ratio,
        "note": note,
    }


def _ours(path: str, tok: Any, work: str) -> tuple[float, float, int, Any]:
    """(first pack fresh, reopen, bytes written, the packed dataset)."""
    firsts, reopens = [], []
    packed: Any = None
    for r in range(RUNS):
        index_dir = os.path.join(work, f"ours-{r}")
        os.makedirs(index_dir)

        def pack(index_dir: str = index_dir) -> Any:
            ds = JSONLDataset(path, index_dir=index_dir)
            out = ds.pack(SEQ_LEN, tokenizer=tok, column=document, cache_key="contents-v1")
            out[0]
            return out

        t, packed = _timed(pack)
        firsts.append(t)
        reopens.append(_timed(pack)[0])
    written = _bytes_under(os.path.join(work, "ours-0"))
    return statistics.median(firsts), statistics.median(reopens), written, packed


def _streamed(path: str, tok: Any, work: str) -> dict[str, float]:
    """First pack of ``pack_stream`` (1,000-document windows) on a fresh corpus: over the dataset (its index
    built first) and over a JSONLStream (no index); and the padding efficiency of the whole stream."""
    from sjsonl import JSONLStream

    def first(source: Any) -> Any:
        return next(iter(source.pack_stream(SEQ_LEN, tokenizer=tok, column=document, window=STREAM_WINDOW)))

    indexed = []
    for r in range(RUNS):
        index_dir = os.path.join(work, f"stream-{r}")
        os.makedirs(index_dir)
        indexed.append(_timed(lambda d=index_dir: first(JSONLDataset(path, index_dir=d)))[0])
    plain = statistics.median(_timed(lambda: first(JSONLStream(path)))[0] for _ in range(RUNS))
    packs = JSONLStream(path).pack_stream(SEQ_LEN, tokenizer=tok, column=document, window=STREAM_WINDOW)
    lengths = [len(p["input_ids"]) for p in packs]
    return {
        "indexed": statistics.median(indexed),
        "stream": plain,
        "efficiency": sum(lengths) / (len(lengths) * SEQ_LEN),
        "packs": len(lengths),
    }


def _theirs(path: str, tok: Any, work: str) -> tuple[float, float, int, Any]:
    import datasets
    from trl import pack_dataset

    datasets.disable_progress_bars()
    eos = tok.eos_token_id

    def tokenize(batch: dict) -> dict:
        rows = [dict(zip(batch, values)) for values in zip(*batch.values())]
        texts = [document(row) for row in rows]
        return {"input_ids": [[*ids, eos] for ids in tok(texts)["input_ids"]]}

    def route(cache_dir: str) -> Any:
        ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache_dir)
        ds = ds.map(tokenize, batched=True, remove_columns=ds.column_names)
        packed = pack_dataset(ds, SEQ_LEN, strategy="bfd")
        packed[0]
        return packed

    firsts, reopens = [], []
    packed: Any = None
    for r in range(RUNS):
        cache_dir = os.path.join(work, f"theirs-{r}")
        t, packed = _timed(lambda cache_dir=cache_dir: route(cache_dir))
        firsts.append(t)
        reopens.append(
            _timed(lambda cache_dir=cache_dir: route(cache_dir))[0]
        )  # Arrow and map results cached
    written = _bytes_under(os.path.join(work, "theirs-0"))
    return statistics.median(firsts), statistics.median(reopens), written, packed


def _loader_pass(packed: Any) -> int:
    import torch

    loader = torch.utils.data.DataLoader(packed, batch_size=8, num_workers=2, collate_fn=list)
    return sum(len(p["input_ids"]) for batch in loader for p in batch)


_FRESH = """
import sys, time
from transformers import PreTrainedTokenizerFast
from sjsonl import JSONLDataset
sys.path.insert(0, {here!r})
from bench_packing import document
tok = PreTrainedTokenizerFast.from_pretrained({tok_dir!r})
t0 = time.perf_counter()
ds = JSONLDataset({path!r}, index_dir={index_dir!r})
ds.pack({seq}, tokenizer=tok, column=document, cache_key="contents-v1")[0]
print(time.perf_counter() - t0)
"""


def _fresh_process_first_pack(path: str, tok: Any, work: str) -> float:
    """Seconds from ``JSONLDataset(path)`` to its first pack in a new interpreter, the index and token
    lengths on disk (from :func:`_ours`), the tokenizer loaded before the clock starts."""
    tok_dir = os.path.join(work, "tokenizer")
    tok.save_pretrained(tok_dir)
    code = _FRESH.format(here=os.path.dirname(os.path.abspath(__file__)), tok_dir=tok_dir, path=path,
                         index_dir=os.path.join(work, "ours-0"), seq=SEQ_LEN)  # fmt: skip
    times = []
    for _ in range(RUNS):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


_ROUTE = """
import sys, time
import orjson, torch
from transformers import PreTrainedTokenizerFast
sys.path.insert(0, {here!r})
from bench_packing import document
tok = PreTrainedTokenizerFast.from_pretrained({tok_dir!r})
path, seq, eos = {path!r}, {seq}, tok.eos_token_id
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) restarts from here: the imports' transient peak is not the route's
before = status("VmRSS:")
t0 = time.perf_counter()
{route}
print(time.perf_counter() - t0, status("VmHWM:") - before)
"""

#: The first pack by each route, in a fresh interpreter (torch and the tokenizer imported before the clock):
#: its seconds and how far the route raised the process's peak RSS.
ROUTES = {
    "sjsonl pack": """
from sjsonl import JSONLDataset
JSONLDataset(path, index_dir={index_dir!r}).pack(seq, tokenizer=tok, column=document)[0]
""",
    "torchtune PackedDataset": """
from torchtune.datasets import PackedDataset

class Documents(torch.utils.data.Dataset):  # tokenized when read, as torchtune's text datasets are
    def __init__(self):
        with open(path, "rb") as f:
            self.records = [orjson.loads(line) for line in f]
    def __len__(self):
        return len(self.records)
    def __getitem__(self, i):
        ids = tok(document(self.records[i]))["input_ids"] + [eos]
        return {{"tokens": ids, "labels": ids}}

PackedDataset(Documents(), max_seq_len=seq, padding_idx=tok.pad_token_id, split_across_pack=True)[0]
""",
}


def _routes_in_a_process(path: str, tok: Any, work: str) -> dict[str, tuple[float, float]]:
    """``{route: (seconds to the first pack, peak RSS growth MiB)}``, medians of fresh processes on a fresh
    corpus (sjsonl's index and lengths written to a new directory each run)."""
    tok_dir = os.path.join(work, "tokenizer")
    tok.save_pretrained(tok_dir)
    out = {}
    for name, route in ROUTES.items():
        runs = []
        for r in range(RUNS):
            index_dir = os.path.join(work, f"route-{r}")
            code = _ROUTE.format(here=os.path.dirname(os.path.abspath(__file__)), tok_dir=tok_dir, path=path,
                                 seq=SEQ_LEN, route=route.format(index_dir=index_dir))  # fmt: skip
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            seconds, rss = done.stdout.split()[-2:]
            runs.append((float(seconds), int(rss) / 1024))
            shutil.rmtree(index_dir, ignore_errors=True)
        out[name] = (statistics.median(t for t, _ in runs), statistics.median(m for _, m in runs))
    return out


#: The chat SFT samples of ../shared/data (not in a user's clone: the rows are skipped there, and said so).
SHARED_CHATS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "jsonl"
CHAT_FILES = [
    "llama_factory/v1_sft_demo.jsonl",
    "llama_factory/reason_tool_use_demo_50.jsonl",
    "xtuner/mllm_sft_text_example_data.jsonl",
    "xtuner/openai_sft.jsonl",
]


def _chat_text(record: Any) -> str:
    """The turns of a chat record (``{"messages": [...]}`` or a bare list of them), contents one per line;
    typed content parts give their text."""
    messages = record["messages"] if isinstance(record, dict) else record
    texts = []
    for m in messages:
        content = m.get("content", "")
        if isinstance(content, list):
            content = " ".join(str(p.get("value", p.get("text", ""))) for p in content if isinstance(p, dict))
        texts.append(str(content))
    return "\n".join(texts)


def _chat_rows(tok: Any) -> list[dict]:
    """Padding efficiency at ``seq_len`` 2048 on the token lengths of ../shared's chat samples: sjsonl's
    best-fit and first-fit against TRL's ``pack_dataset(bfd)`` on the same lengths."""
    import datasets
    from trl import pack_dataset

    paths = [SHARED_CHATS / name for name in CHAT_FILES]
    if not all(p.exists() for p in paths):
        return [{"benchmark": "efficiency, ../shared chat files", "variant": "skipped: ../shared not here"}]
    texts = [
        _chat_text(orjson.loads(line)) for p in paths for line in p.read_bytes().splitlines() if line.strip()
    ]
    lengths = np.array([len(ids) + 1 for ids in tok(texts)["input_ids"]], np.int64)
    fake = datasets.Dataset.from_dict({"input_ids": [[1] * int(n) for n in lengths]})
    trl = pack_dataset(fake, SEQ_LEN, strategy="bfd")
    trl_eff = sum(len(x) for x in trl["input_ids"]) / (len(trl) * SEQ_LEN)
    label = f"efficiency, ../shared chat files ({len(texts):,} chats, {int(lengths.sum()):,} tokens)"
    rows = []
    for strategy in ("bfd", "first_fit"):
        eff = plan_packs(lengths, SEQ_LEN, strategy).efficiency
        figure(f"efficiency_chats_{strategy}", eff * 100, "%",
               what=f"padding efficiency, {strategy}, seq_len {SEQ_LEN}, the chat samples of ../shared",
               median_of=1, baseline="TRL pack_dataset(bfd)", baseline_value=trl_eff * 100)  # fmt: skip
        rows.append({"benchmark": label, "variant": f"sjsonl {strategy}", "median": f"{eff:.4f}"})
    rows.append(
        {"benchmark": label, "variant": "TRL bfd", "median": f"{trl_eff:.4f}", "note": f"{len(trl)} packs"}
    )
    return rows


def _plan_rows(quick: bool) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for n in [1_000_000] + ([] if quick else [10_000_000]):
        lengths = np.maximum(1, rng.lognormal(np.log(300), 1.0, n)).astype(np.int64)
        for strategy in ("bfd", "wrapped"):
            t = statistics.median(
                _timed(lambda s=strategy, x=lengths: plan_packs(x, SEQ_LEN, s))[0] for _ in range(RUNS)
            )
            tracemalloc.start()
            plan = plan_packs(lengths, SEQ_LEN, strategy)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            label = f"{n // 1_000_000}M"
            what = f"planning {label} documents (lognormal, median 300), {SEQ_LEN}-token packs, {strategy}"
            figure(f"plan_{strategy}_{label}", t, "s", what=what, median_of=RUNS)
            note = f"peak {peak / 2**20:.0f} MiB, efficiency {plan.efficiency:.4f}"
            rows.append(_row("plan", f"{strategy}, {n:,} documents", t, None, note))
    return rows


def _texts(path: str) -> list[str]:
    with open(path, "rb") as f:
        return [document(orjson.loads(line)) for line in f]


def run(quick: bool) -> list[dict]:
    path = str(corpus("long", (8 if quick else 64) << 20))
    tok = _tokenizer(path)
    texts = _texts(path)
    backend = tok.backend_tokenizer
    raw = statistics.median(_timed(lambda: backend.encode_batch(texts))[0] for _ in range(RUNS))
    tokens = sum(len(e.ids) + 1 for e in backend.encode_batch(texts))
    rows = [_row("tokenizer alone", f"encode_batch, {len(texts):,} documents, {tokens:,} tokens", raw, None)]
    work = tempfile.mkdtemp(prefix="sjsonl-bench-pack-")
    try:
        first, reopen, ours_bytes, packed = _ours(path, tok, work)
        fresh = _fresh_process_first_pack(path, tok, work)
        t_first, t_reopen, theirs_bytes, trl = _theirs(path, tok, work)
        streamed = _streamed(path, tok, work)
        routes = _routes_in_a_process(path, tok, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figure("pack_first_cached", fresh * 1e3, "ms",
           what="first pack in a fresh process, index and token lengths cached (tokenizer already loaded)",
           median_of=RUNS)  # fmt: skip
    rows.append(_row("first pack, fresh process, lengths cached", "sjsonl", fresh, None))
    size = f"{os.path.getsize(path) >> 20} MiB, {len(texts):,} documents"
    route = "🤗 load_dataset + map + TRL pack_dataset(bfd)"
    figure("pack_first", first, "s", what=f"JSONL → first {SEQ_LEN}-token pack, fresh ({size})",
           median_of=RUNS, baseline=route, baseline_value=t_first)  # fmt: skip
    figure("pack_reopen", reopen, "s", what="the same pack again (index and token lengths from their files)",
           median_of=RUNS, baseline="🤗 + TRL from its cache", baseline_value=t_reopen)  # fmt: skip
    figure("pack_disk", ours_bytes / 1e6, "MB", what=f"bytes written to pack a corpus ({size})",
           median_of=1, baseline="🤗 Arrow cache + TRL", baseline_value=theirs_bytes / 1e6)  # fmt: skip
    (ours_t, ours_rss), (tune_t, tune_rss) = routes["sjsonl pack"], routes["torchtune PackedDataset"]
    peaks = f"peak RSS +{ours_rss:,.0f} MiB vs +{tune_rss:,.0f}"
    what = f"first pack in a fresh process, fresh corpus ({size}); {peaks}"
    figure("pack_first_vs_torchtune", ours_t, "s", what=what,
           median_of=RUNS, baseline="torchtune PackedDataset (packs everything in RAM first)",
           baseline_value=tune_t)  # fmt: skip
    rows += [
        _row("first pack, fresh process", "sjsonl pack", ours_t, tune_t, f"peak RSS +{ours_rss:,.0f} MiB"),
        _row("first pack, fresh process", "torchtune PackedDataset(split_across_pack=True)", tune_t, None,
             f"peak RSS +{tune_rss:,.0f} MiB; torch imported in both before the clock"),
    ]  # fmt: skip
    what = (
        f"JSONL → first {SEQ_LEN}-token pack with pack_stream (windows of {STREAM_WINDOW:,}), fresh ({size})"
    )
    figure("pack_stream_first", streamed["indexed"], "s", what=what,
           median_of=RUNS, baseline=route, baseline_value=t_first)  # fmt: skip
    rows += [
        _row("first pack, fresh", f"sjsonl pack_stream: index + one window of {STREAM_WINDOW:,}",
             streamed["indexed"], t_first, "writes the index only"),
        _row("first pack, fresh", "sjsonl JSONLStream.pack_stream: no index", streamed["stream"], t_first,
             "writes nothing"),
    ]  # fmt: skip
    rows += [
        _row("first pack, fresh", "sjsonl: index + lengths + plan + pack 0", first, t_first,
             f"writes {ours_bytes / 1e6:.1f} MB"),
        _row("first pack, fresh", route, t_first, None, f"writes {theirs_bytes / 1e6:.1f} MB"),
        _row("reopen", "sjsonl: pack again", reopen, t_reopen),
        _row("reopen", "🤗 + TRL from cache", t_reopen, None),
    ]  # fmt: skip
    pass_time = statistics.median(
        _timed(lambda: sum(len(p["input_ids"]) for p in packed))[0] for _ in range(RUNS)
    )
    what = f"a full pass over the {len(packed):,} packs, tokens made when read"
    figure("pack_pass", pass_time, "s", what=what,
           median_of=RUNS, baseline="the tokenizer's encode_batch alone", baseline_value=raw)  # fmt: skip
    rows.append(
        _row("full pass over packs", f"{len(packed):,} packs", pass_time, raw, "vs the tokenizer alone")
    )
    loader_time = statistics.median(_timed(lambda: _loader_pass(packed))[0] for _ in range(RUNS))
    figure("pack_loader", loader_time, "s", what="the packs through a DataLoader with 2 workers (batch 8)",
           median_of=RUNS, baseline="the tokenizer's encode_batch alone", baseline_value=raw)  # fmt: skip
    rows.append(
        _row("DataLoader, 2 workers", f"{len(packed):,} packs", loader_time, raw, "vs the tokenizer alone")
    )
    trl_eff = sum(len(x) for x in trl["input_ids"]) / (len(trl) * SEQ_LEN)
    for strategy in ("bfd", "first_fit", "wrapped"):
        eff = plan_packs(packed.plan.lengths, SEQ_LEN, strategy).efficiency
        what = f"padding efficiency, {strategy}, seq_len {SEQ_LEN}"
        figure(f"efficiency_{strategy}", eff * 100, "%", what=what,
               median_of=1, baseline="TRL pack_dataset(bfd)", baseline_value=trl_eff * 100)  # fmt: skip
        rows.append({"benchmark": "efficiency", "variant": f"sjsonl {strategy}", "median": f"{eff:.4f}"})
    figure("efficiency_stream", streamed["efficiency"] * 100, "%",
           what=f"padding efficiency, pack_stream (bfd in windows of {STREAM_WINDOW:,}), seq_len {SEQ_LEN}",
           median_of=1, baseline="TRL pack_dataset(bfd)", baseline_value=trl_eff * 100)  # fmt: skip
    variant = f"sjsonl pack_stream, windows of {STREAM_WINDOW:,}"
    note = f"{streamed['packs']:,} packs"
    rows.append({"benchmark": "efficiency", "variant": variant, "median": f"{streamed['efficiency']:.4f}"}
                | {"note": note})  # fmt: skip
    rows.append(
        {
            "benchmark": "efficiency",
            "variant": "TRL bfd",
            "median": f"{trl_eff:.4f}",
            "note": f"{len(trl):,} packs",
        }
    )
    for row in rows:
        row.setdefault("ratio", "")
        row.setdefault("note", "")
    return rows + _chat_rows(tok) + _plan_rows(quick)


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "8 MiB corpus, 1M planning only")
