"""Emulator extension: a Kinesis shard's trim horizon, and MillisBehindLatest as AWS reports it.

1. Trimming. AWS drops a shard's records once they are older than the stream's retention (24
   hours to a year); moto never drops any. A test cannot wait that long, so this adds one
   test-only action, ``EmulatorTrimShard`` (no AWS API has it), that drops a shard's oldest
   records at once, as the retention would:

       POST / with X-Amz-Target: Kinesis_20131202.EmulatorTrimShard
       {"StreamARN" or "StreamName", "ShardId", "BeforeSequenceNumber": "<n>", "EmptyPages": <k, optional>}
       -> {"TrimmedRecords": <how many were dropped>}

   After it, reads behave as on AWS, which does not say that a position was trimmed: an
   AFTER_SEQUENCE_NUMBER or AT_SEQUENCE_NUMBER iterator at a dropped record, TRIM_HORIZON, and
   AT_TIMESTAMP before the oldest kept record all start at the oldest record kept. Sequence
   numbers go on from the newest ever written (moto would start again at 1 once a shard held
   no record). With EmptyPages, the shard's next k GetRecords calls return no record, the same
   position and a MillisBehindLatest above 0, as AWS may answer just after its trim horizon ("GetRecords
   might return an empty result ... multiple calls might be needed", Kinesis API Reference).
   `trim_shard` below sends the action from a test.
2. MillisBehindLatest. moto reports the arrival time between the last record returned and the
   shard's newest, which is 0 whenever the remaining records arrived in the same millisecond,
   so a reader with records still to read looks caught up. AWS: "A value of zero indicates that
   record processing is caught up, and there are no new records to process at this moment"
   (GetRecords, Kinesis Data Streams API Reference). Here it is at least 1 while records remain.

Pinned to moto 5.2: moto routes a request by botocore's service model, which has no such action,
so this wraps KinesisResponse.call_action to answer it first, reading the JSON body itself; it
replaces Shard.put_record, Shard.get_max_sequence_number and Shard.get_records.
tests/support/test_moto_internals.py checks the moto internals this relies on.
"""

from __future__ import annotations

import functools
import json
import urllib.request

from moto.kinesis.models import Record, Shard
from moto.kinesis.responses import KinesisResponse


TRIM_TARGET = "Kinesis_20131202.EmulatorTrimShard"


def install() -> None:
    KinesisResponse.call_action = _answer_trim_first(KinesisResponse.call_action)
    Shard.put_record = put_record
    Shard.get_max_sequence_number = get_max_sequence_number
    Shard.get_records = _behind_while_records_remain(Shard.get_records)


def _answer_trim_first(call_action):
    @functools.wraps(call_action)
    def answer(self: KinesisResponse):
        if self.headers.get("X-Amz-Target") != TRIM_TARGET:
            return call_action(self)
        return 200, {"Content-Type": "application/x-amz-json-1.1"}, emulator_trim_shard(self, json.loads(self.body))

    return answer


def emulator_trim_shard(self: KinesisResponse, request: dict) -> str:
    """Drop the shard's records numbered below BeforeSequenceNumber, as the retention would."""
    stream = self.kinesis_backend.describe_stream(stream_arn=request.get("StreamARN"), stream_name=request.get("StreamName"))
    shard = stream.get_shard(request["ShardId"])
    before = int(request["BeforeSequenceNumber"])
    dropped = [number for number in shard.records if number < before]
    if dropped:
        shard.trimmed_through = max(getattr(shard, "trimmed_through", 0), dropped[-1])
    for number in dropped:
        del shard.records[number]
    shard.empty_pages = int(request.get("EmptyPages", 0))
    return json.dumps({"TrimmedRecords": len(dropped)})


def get_max_sequence_number(self: Shard) -> int:
    """The newest sequence number the shard ever gave, kept or trimmed (0: none yet)."""
    newest = next(reversed(self.records)) if self.records else 0
    return max(newest, getattr(self, "trimmed_through", 0))


def put_record(self: Shard, partition_key: str, data: bytes, explicit_hash_key: str) -> str:
    sequence_number = self.get_max_sequence_number() + 1
    self.records[sequence_number] = Record(partition_key, data, sequence_number, explicit_hash_key)
    return str(sequence_number)


def _behind_while_records_remain(get_records):
    @functools.wraps(get_records)
    def records(self: Shard, last_sequence_id: str, limit: int | None):
        if getattr(self, "empty_pages", 0) > 0:
            self.empty_pages -= 1
            return [], int(last_sequence_id), 1
        found, read_up_to, millis_behind = get_records(self, last_sequence_id, limit)
        remaining = bool(self.records) and next(reversed(self.records)) > read_up_to
        return found, read_up_to, max(millis_behind, 1) if remaining else 0

    return records


def trim_shard(
    endpoint_url: str, stream_arn: str, shard_id: str, before_sequence: str, region: str = "us-east-1", empty_pages: int = 0
) -> int:
    """Client side: ask the emulator to drop the shard's records below `before_sequence` (then answer
    `empty_pages` empty pages); how many it dropped."""
    request = {"StreamARN": stream_arn, "ShardId": shard_id, "BeforeSequenceNumber": str(before_sequence)}
    body = json.dumps({**request, "EmptyPages": empty_pages})
    request = urllib.request.Request(
        endpoint_url, data=body.encode(), method="POST",
        headers={
            "X-Amz-Target": "Kinesis_20131202.EmulatorTrimShard",
            "Content-Type": "application/x-amz-json-1.1",
            # moto picks the region's backend from the credential scope; the signature is not checked
            "Authorization": f"AWS4-HMAC-SHA256 Credential=test/20260101/{region}/kinesis/aws4_request, SignedHeaders=host, Signature=0",
        },
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["TrimmedRecords"])
