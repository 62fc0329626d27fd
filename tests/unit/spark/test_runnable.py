"""Every flow on Spark keeps one contract with the runner: the ``Runnable`` ABC."""

from __future__ import annotations

from gridstream.connect.sink import SinkConnector
from gridstream.connect.source import SourceConnector
from gridstream.feeds.feed import StoreFeed
from gridstream.pipeline.run import PipelineJob
from gridstream.spark.runnable import Runnable

FLOWS = (StoreFeed, PipelineJob, SourceConnector, SinkConnector)


def test_every_flow_subclasses_the_contract_with_a_kind_of_its_own() -> None:
    assert all(issubclass(flow, Runnable) for flow in FLOWS)
    assert sorted(flow.kind for flow in FLOWS) == [
        "pipeline", "sink connector", "source connector", "store feed"]


def test_the_optional_parts_have_defaults() -> None:
    class Bare(Runnable):
        kind = "bare"
        name = "b"

        def describe(self) -> str:
            return "bare"

        def start(self, spark: object) -> object:  # type: ignore[override]
            return None

    bare = Bare()
    assert (bare.endpoints(), bare.restartable, bare.replan("x"), bare.lags(None),
            bare.progressed(None), bare.close(), bare.failure) == (
        ([], []), True, False, {}, None, None, None)
