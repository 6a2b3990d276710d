"""TxnOffsetCommit v5 (KIP-890) through a real connection and App over memory storage
(support/in_process.py, no sockets): kcoord adds the group to the producer's transaction itself,
once the request is authorized as AddOffsetsToTxn is; a refused one adds nothing."""

from __future__ import annotations

from kcoord.coordinator.net.acls import Acl, AclOperation, AclPermission, AclRules, PatternType, ResourceType
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.in_process import Harness

PRINCIPAL = "User:alice"
R = m.TxnOffsetCommitRequest


def commit(group: str, offset: int) -> m.TxnOffsetCommitRequest:
    return R(transactional_id="tx", group_id=group, producer_id=7, producer_epoch=0,
             topics=[R.TxnOffsetCommitRequestTopic(name="t", partitions=[
                 R.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])  # fmt: skip


def errors(answer: m.TxnOffsetCommitResponse) -> set[int]:
    return {p.error_code for t in answer.topics for p in t.partitions}


def alice_may(*acls: tuple[ResourceType, str, AclOperation]) -> AclRules:
    return AclRules(
        [
            Acl(kind, PatternType.LITERAL, name, PRINCIPAL, "*", op, AclPermission.ALLOW)
            for kind, name, op in acls
        ],
        frozenset(),
        False,
    )


async def test_v5_opens_the_transaction_in_the_shard_and_commits() -> None:
    h = Harness(1)
    await h.start()
    [answer] = await h.roundtrip(ApiKey.TXN_OFFSET_COMMIT, 5, [commit("g", 3)])
    assert errors(answer) == {ErrorCode.NONE}
    assert h.app.shards[0].state.has_open_transactions()


async def test_a_refused_v5_adds_nothing_to_the_transaction() -> None:
    h = Harness(1)
    await h.start()
    h.conn.principal = PRINCIPAL
    h.app.authorization.allow_all = False
    # WRITE on the transactional id and READ on the topic, but nothing on the group.
    h.app.authorization.rules = alice_may(
        (ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
        (ResourceType.TOPIC, "t", AclOperation.READ),
    )
    [answer] = await h.roundtrip(ApiKey.TXN_OFFSET_COMMIT, 5, [commit("g", 3)])
    assert errors(answer) == {ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert not h.app.shards[0].state.has_open_transactions()
    h.app.authorization.rules = alice_may((ResourceType.GROUP, "g", AclOperation.READ))  # no WRITE on "tx"
    [answer] = await h.roundtrip(ApiKey.TXN_OFFSET_COMMIT, 5, [commit("g", 3)])
    assert errors(answer) == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert not h.app.shards[0].state.has_open_transactions()
