"""The loopback S3 server (moto) the ``s3_server`` fixture starts, and its fake environment."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["S3Server", "fake_aws_env", "age_s3_bucket"]


@dataclass
class S3Server:
    endpoint: str

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"bkt-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def fake_aws_env() -> dict[str, str]:
    # obviously fake, built at run time
    return {
        "AWS_ACCESS_KEY_ID": "testing-" + "x" * 8,
        "AWS_SECRET_ACCESS_KEY": "testing-" + "y" * 16,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }


def age_s3_bucket(bucket: str, seconds: float, *, keep_young: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """Make the moto server report objects as ``seconds`` old (its LastModified).

    The moto server runs in this process; moving a key's stored timestamp back is the S3
    counterpart of ``os.utime`` on a local store. Keys containing any string of
    ``keep_young`` keep their real timestamps. Returns how many keys were aged.
    """
    import datetime as dt

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    past = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=seconds)
    aged = 0
    for key in backend.buckets[bucket].keys.values():
        if any(y in key.name for y in keep_young):
            continue
        key.last_modified = past
        aged += 1
    return aged
