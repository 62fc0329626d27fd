"""Transactions: all-or-nothing, read-your-writes, one bulk in the log."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from gridstream.errors import OperationLogError, TransactionError
from gridstream.operations import OpType
from gridstream.space import Space

from .models import Order, Person


def test_commit_is_one_bulk_with_a_txn_id(space: Space) -> None:
    space.write(Person(0, "before"))
    with space.transaction() as tx:
        v1 = tx.write(Person(1, "Ann"))
        v2 = tx.write(Order("o1", "bob"))
        tx.change(Person, 0, {"age": 5})
        assert tx.read(Person, 1) == Person(1, "Ann")  # read-your-writes
        assert space.read(Person, 1) == Person(1, "Ann")  # same thread joins the tx
    assert (v1, v2) == (2, 3)
    reader = space.log_reader()
    bulks = reader.read(1, 100)
    reader.close()
    assert [b.first_seq for b in bulks] == [1, 2]
    txn = bulks[1]
    assert txn.txn_id == tx.txn_id and len(txn.operations) == 3
    assert {op.txn_id for op in txn.operations} == {tx.txn_id}
    assert [op.version for op in txn.operations] == [2, 3, 4]
    assert len({op.partition for op in txn.operations}) >= 1


def test_rollback_on_exception_logs_nothing(space: Space) -> None:
    space.write(Person(1, "Ann", 30))
    with pytest.raises(RuntimeError), space.transaction() as tx:
        tx.write(Person(2, "Bob"))
        tx.update(Person(1, "Changed", 99))
        tx.remove(Person, 1)
        raise RuntimeError("boom")
    assert space.read(Person, 1) == Person(1, "Ann", 30)
    assert space.read(Person, 2) is None
    assert space.next_seq == 2  # the sequence numbers were given back
    assert space.read_multiple(Person, index={"name": "Changed"}) == []
    space.write(Person(3, "Cy"))
    reader = space.log_reader()
    assert [b.first_seq for b in reader.read(1, 100)] == [1, 2]
    reader.close()


def test_explicit_rollback_and_reuse(space: Space) -> None:
    with space.transaction() as tx:
        tx.write(Person(1))
        tx.rollback()
    assert space.read(Person, 1) is None
    with pytest.raises(TransactionError):
        tx.write(Person(2))
    with pytest.raises(TransactionError), tx:
        pass


def test_nested_transactions_are_refused(space: Space) -> None:
    with space.transaction(), pytest.raises(TransactionError):
        space.transaction().__enter__()
    space.write(Person(1))  # the outer one ended cleanly


def test_other_threads_wait_for_the_transaction(space: Space) -> None:
    seen: list[Person | None] = []
    started = threading.Event()

    def reader() -> None:
        started.set()
        seen.append(space.read(Person, 1))

    with space.transaction() as tx:
        tx.write(Person(1, "Ann"))
        thread = threading.Thread(target=reader)
        thread.start()
        started.wait()
        time.sleep(0.05)
        assert not seen  # blocked: uncommitted writes are never visible elsewhere
    thread.join(5)
    assert seen == [Person(1, "Ann")]


def test_a_transaction_belongs_to_its_thread(space: Space) -> None:
    errors: list[BaseException] = []
    with space.transaction() as tx:
        def use() -> None:
            try:
                tx.write(Person(5))
            except TransactionError as exc:
                errors.append(exc)

        thread = threading.Thread(target=use)
        thread.start()
        thread.join(5)
    assert len(errors) == 1


def test_failed_commit_rolls_back(open_space: Callable[..., Space],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    space = open_space()
    space.write(Person(1, "Ann"))

    def fail(*_: object) -> int:
        raise OperationLogError("disk full")

    with pytest.raises(OperationLogError), space.transaction() as tx:
        tx.write(Person(2, "Bob"))
        tx.remove(Person, 1)
        monkeypatch.setattr(space._core.writer, "append", fail)
    monkeypatch.undo()
    assert space.read(Person, 1) == Person(1, "Ann")
    assert space.read(Person, 2) is None
    assert space.write(Person(3)) == 2


def test_empty_transaction_logs_nothing(space: Space) -> None:
    with space.transaction():
        pass
    assert space.next_seq == 1


def test_remove_and_take_inside_a_transaction(space: Space) -> None:
    space.write(Person(1, "Ann"))
    with space.transaction() as tx:
        assert tx.take(Person, 1) == Person(1, "Ann")
        assert tx.read(Person, 1) is None
        tx.write(Person(1, "Ann again"))
    reader = space.log_reader()
    ops = [op.op for op in reader.read(2, 10)[0].operations]
    reader.close()
    assert ops == [OpType.TAKE, OpType.WRITE]
