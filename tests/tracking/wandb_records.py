"""A W&B offline run file (run-<id>.wandb) read back as wandb's own protobuf records
(wandb.proto.wandb_internal_pb2.Record), for the tests.

The file is a LevelDB log: a 7-byte header (':W&B', a 2-byte magic, a version byte), then
32 KiB blocks of chunks, each with a 7-byte header (CRC-32C, little-endian length, type:
1 a whole record, 2/3/4 its first/middle/last part); a block's tail shorter than a chunk
header is zero padding."""

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    pos, parts, found = HEADER, [], []
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0:  # zero padding to the block's end
            pos += left
            continue
        parts.append(data[pos + HEADER : pos + HEADER + length])
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            found.append(record)
            parts = []
    return found


def _items(items) -> dict:
    return {
        ".".join([i.key, *i.nested_key] if i.key else list(i.nested_key)): json.loads(i.value_json)
        for i in items
    }


def offline_run(folder: Path) -> dict:
    """config, history (step -> {key: value}) and summary of one offline run folder."""
    (path,) = Path(folder).glob("run-*.wandb")
    run = {"config": {}, "history": {}, "summary": {}, "run": None}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run["run"] = record.run
            run["config"].update(_items(record.run.config.update))
        elif kind == "config":
            run["config"].update(_items(record.config.update))
        elif kind == "history":
            step = record.history.step.num
            run["history"].setdefault(step, {}).update(_items(record.history.item))
        elif kind == "summary":
            run["summary"].update(_items(record.summary.update))
    return run
