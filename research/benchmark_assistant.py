#!/usr/bin/env python
"""Benchmark of the Assistant's CPU side, on one core: feature building, memory of a
second mapping process, scoring, learning and batch generation.

    python -m research.benchmark_assistant --pairs 1000000 --out docs/results/assistant_1M.json
    python -m research.benchmark_assistant --data work/multi30k -s en -t de --out FILE.json

It writes a generated binarised corpus (random lengths 5-60, Zipf-distributed tokens
over a 32k joint vocabulary) with fairseq's own dataset builder, or links the train split
of a prepared DATA directory (its own features are left alone), then times
``autoassist-features``' build function on it and measures the rest. Batches are cut as
the plugin does by default (max_tokens 4096, windows of 4096 candidates).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch


def write_corpus(data_dir, pairs, vocab=32000, seed=0):
    from fairseq.data import Dictionary, indexed_dataset

    rng = np.random.default_rng(seed)
    d = Dictionary()
    for i in range(vocab - d.nspecial):
        d.add_symbol(f"w{i}", n=vocab - i)
    for lang in ("src", "tgt"):
        d.save(os.path.join(data_dir, f"dict.{lang}.txt"))
    lengths = rng.integers(5, 61, size=(2, pairs))
    for side, lang in enumerate(("src", "tgt")):
        prefix = os.path.join(data_dir, f"train.src-tgt.{lang}")
        builder = indexed_dataset.MMapIndexedDatasetBuilder(prefix + ".bin", dtype=np.uint16)
        tokens = np.minimum(rng.zipf(1.2, size=int(lengths[side].sum())) + d.nspecial - 1,
                            len(d) - 1).astype(np.int64)
        tokens = torch.from_numpy(tokens)
        eos = torch.tensor([d.eos()])
        start = 0
        for n in lengths[side]:  # n - 1 words and the eos fairseq-preprocess appends
            builder.add_item(torch.cat([tokens[start:start + n - 1], eos]))
            start += n - 1
        builder.finalize(prefix + ".idx")
    return lengths


def link_split(data, workdir, src, tgt):
    """Link DATA's dictionaries and train split into *workdir*; returns (src, tgt) sizes."""
    from fairseq.data import data_utils

    names = [f"dict.{lang}.txt" for lang in (src, tgt)] + [
        f"train.{src}-{tgt}.{lang}.{ext}" for lang in (src, tgt) for ext in ("bin", "idx")]
    for name in names:
        path = os.path.join(os.path.abspath(data), name)
        if not os.path.exists(path):
            sys.exit(f"error: {path} not found (a fairseq-preprocess --destdir is expected)")
        os.symlink(path, os.path.join(workdir, name))
    sizes = []
    for lang in (src, tgt):
        dataset = data_utils.load_indexed_dataset(
            os.path.join(workdir, f"train.{src}-{tgt}.{lang}"), None)
        sizes.append(np.array(dataset.sizes))  # a copy: the dataset unmaps its file when freed
    return sizes


def memory_of_second_process(prefix):
    """Memory (MB) a second process adds by mapping the features (which this process has
    mapped and read already), then by scoring every row: RSS counts the shared file pages
    it touches, Private what it alone holds, PSS its share."""
    code = f"""
import json, numpy as np
def mem():
    out = {{}}
    for line in open('/proc/self/smaps_rollup'):
        k, v = line.split(':', 1)
        if k in ('Rss', 'Private_Clean', 'Private_Dirty', 'Pss'):
            out[k] = int(v.split()[0])
    out['Private'] = out.pop('Private_Clean') + out.pop('Private_Dirty')
    return out
from autoassist_fairseq.features.store import FeatureStore
from autoassist_fairseq.assistant.model import predict_proba
before = mem()
store = FeatureStore.open({prefix!r})
mapped = mem()
theta = np.zeros(store.dim)
for start in range(0, store.num_rows, 16384):
    predict_proba(store.rows(np.arange(start, min(start + 16384, store.num_rows))), theta, 0.0)
scored = mem()
print(json.dumps({{'before': before, 'mapped': mapped, 'scored': scored}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    m = json.loads(out.stdout.strip().splitlines()[-1])
    return {stage: {k: (m[stage][k] - m["before"][k]) / 1024 for k in ("Rss", "Pss", "Private")}
            for stage in ("mapped", "scored")}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.benchmark_assistant --pairs 100000 "
               "--out /tmp/assistant_100k.json")
    parser.add_argument("--pairs", type=int, default=1_000_000,
                        help="pairs of the generated corpus (default 1000000)")
    parser.add_argument("--out", default=None, help="write the figures to this JSON file")
    parser.add_argument("--workdir", default=None,
                        help="keep the corpus here (default: a temporary directory, removed)")
    parser.add_argument("--data", default=None, help="a prepared data directory instead of "
                        "a generated corpus (its train split)")
    parser.add_argument("-s", "--source-lang", default=None,
                        help="source language of --data (required with --data)")
    parser.add_argument("-t", "--target-lang", default=None,
                        help="target language of --data (required with --data)")
    args = parser.parse_args()
    if args.data and not (args.source_lang and args.target_lang):
        parser.error("--data needs --source-lang and --target-lang")
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        measure(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="aa-bench-") as workdir:
            measure(args, workdir)


def measure(args, workdir):
    """Build features in *workdir* and time the Assistant's parts on them."""
    from autoassist_fairseq.assistant import Assistant, AssistantHParams
    from autoassist_fairseq.data.batch_generator import BatchGenerator
    from autoassist_fairseq.features.build import build_features
    from autoassist_fairseq.features.store import FeatureStore

    src, tgt = (args.source_lang, args.target_lang) if args.data else ("src", "tgt")
    if args.data:
        lengths = link_split(args.data, workdir, src, tgt)
        args.pairs = len(lengths[0])
    else:
        t = time.perf_counter()
        lengths = write_corpus(workdir, args.pairs)
        print(f"corpus of {args.pairs} pairs written in {time.perf_counter() - t:.1f}s",
              flush=True)

    t = time.perf_counter()
    prefix = build_features(workdir, src, tgt)
    build_s = time.perf_counter() - t
    store = FeatureStore.open(prefix)
    results = {"data": os.path.abspath(args.data) if args.data else "generated",
               "pairs": args.pairs, "nnz": store.meta["nnz"], "dim": store.dim,
               "feature_build_seconds": build_s, "feature_build_pairs_per_s": args.pairs / build_s,
               "feature_file_mb": sum(os.path.getsize(f"{prefix}.{n}.npy")
                                      for n in ("indptr", "indices", "data")) / 2**20}
    # the paper's rule scores every candidate with g: the costliest rule to measure
    assistant = Assistant(store, AssistantHParams(rule="paper", warmup=0))
    for start in range(0, args.pairs, 16384):  # the first worker maps and reads every row
        assistant.utility(np.arange(start, min(start + 16384, args.pairs)))
    results["second_process_mb"] = memory_of_second_process(prefix)

    rng = np.random.default_rng(0)
    for _ in range(50):  # a trained-looking state: lambda > 0, theta dense
        ids = rng.choice(args.pairs, 256, replace=False)
        assistant.learn(ids, rng.normal(3, 1, 256))
    chunks = [rng.choice(args.pairs, min(16384, args.pairs), replace=False) for _ in range(40)]
    t = time.perf_counter()
    for ids in chunks:
        assistant.accept_probability(ids)
    results["scored_candidates_per_s"] = sum(map(len, chunks)) / (time.perf_counter() - t)
    batches = [(rng.choice(args.pairs, 128, replace=False), rng.normal(3, 1, 128))
               for _ in range(200)]
    t = time.perf_counter()
    for ids, losses in batches:
        assistant.learn(ids, losses)
    results["learn_batches_per_s_128_pairs"] = 200 / (time.perf_counter() - t)

    gen = BatchGenerator(np.arange(args.pairs), lengths[0], lengths[1], max_tokens=4096,
                         window_size=4096)
    gen.begin_pass(1)
    t, n_batches = time.perf_counter(), 0
    while True:  # one data pass
        window = gen.next_window(assistant.accept_probability)
        n_batches += len(window.batches)
        if window.ends_pass:
            break
    results["generator_batches_per_s_max_tokens_4096"] = n_batches / (time.perf_counter() - t)
    results["machine"] = {"cpu_cores_used": 1, "cpus": os.cpu_count(),
                          "processor": platform.processor() or platform.machine()}
    print(json.dumps(results, indent=1))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
