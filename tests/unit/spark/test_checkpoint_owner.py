"""A checkpoint belongs to one kind of flow: another kind given it fails before Spark
reads it, naming the owner (a sink given a source's checkpoint failed inside Spark with
"Expected e.g. {"topicA":{"0":23,…}}, got {"v": 1, … "caches": …")."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridstream.errors import ConfigError
from gridstream.spark.owner import OWNER_FILE, claim_checkpoint


def test_a_checkpoint_of_another_kind_of_flow_is_refused_naming_its_owner(
        tmp_path: Path) -> None:
    ckpt = str(tmp_path / "ck")
    claim_checkpoint(ckpt, "source connector", "hz-big")
    claim_checkpoint(ckpt, "source connector", "hz-big")  # its own: fine, again
    with pytest.raises(ConfigError, match="belongs to source connector 'hz-big'"):
        claim_checkpoint(f"file://{ckpt}", "sink connector", "back")
    claim_checkpoint(ckpt, "source connector", "renamed")  # a rename keeps it
    assert "renamed" in (tmp_path / "ck" / OWNER_FILE).read_text()


def test_a_source_checkpoint_of_an_earlier_version_is_recognised(tmp_path: Path) -> None:
    offsets = tmp_path / "ck" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"v": 1, "t": 1, "caches": {}}\n')
    with pytest.raises(ConfigError, match="belongs to source connector"):
        claim_checkpoint(str(tmp_path / "ck"), "sink connector", "back")


def test_a_checkpoint_elsewhere_than_a_local_directory_is_not_checked() -> None:
    claim_checkpoint("s3a://bucket/ck", "sink connector", "back")
