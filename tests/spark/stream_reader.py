"""Reader process for the streaming tests: polls a destination while a stream writes it,
each poll one snapshot (``committed_files``) and one plain listing, until a stop file
appears (then one last poll). One JSON line per poll: the snapshot's keys and the plain
listing's data keys, relative to the destination.

argv: destination URI, JSON of the data source options (endpoint, region, profile,
addressingStyle), output file, stop file.
"""

from __future__ import annotations

import json
import os
import sys
import time

import boto3
from botocore.config import Config

from zerorename.committers import Destination
from zerorename.spark_adapter.stream.read import committed_files, is_data_key

uri, options, out_path, stop_path = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:5]
dest = Destination.parse(uri)
client = boto3.Session(profile_name=options["profile"] or None).client(
    "s3",
    endpoint_url=options["endpoint"] or None,
    region_name=options["region"] or None,
    config=Config(s3={"addressing_style": options["addressingStyle"]}),
)


def plain() -> list[str]:
    """The data files a reader that lists the destination sees."""
    keys: list[str] = []
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=dest.bucket, Prefix=dest.list_prefix
    )
    for page in pages:
        keys += [o["Key"][len(dest.list_prefix) :] for o in page.get("Contents", [])]
    return [k for k in keys if is_data_key(k)]


def poll() -> dict[str, object]:
    snap = committed_files(
        uri,
        endpoint=options["endpoint"],
        region=options["region"],
        profile=options["profile"],
        addressing_style=options["addressingStyle"],
    )
    return {
        "t": time.time(),
        "snap": [f.key[len(dest.list_prefix) :] for f in snap.files],
        "batches": {q: list(b) for q, b in snap.batches.items()},
        "skipped": dict(snap.skipped),
        "attempts": snap.attempts,
        "plain": plain(),
    }


polls = 0
with open(out_path, "a") as out:
    while True:
        last = os.path.exists(stop_path)
        out.write(json.dumps(poll()) + "\n")
        out.flush()
        polls += 1
        if last:
            break
print("READER-OK", polls)
