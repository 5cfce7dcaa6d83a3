"""The embedded default's SQL broker does not grow without limit: delivered messages go."""

from __future__ import annotations

import uuid

from kombu import Connection

from memoryconsole.celery import app, broker_delivered_purge, broker_transport


def test_it_removes_delivered_messages_and_keeps_waiting_ones() -> None:
    url = str(app.conf.broker_url)
    assert broker_transport(url) == "sqla", "the embedded default's broker"
    delivered_queue, waiting_queue = f"test-{uuid.uuid4()}", f"test-{uuid.uuid4()}"
    with Connection(url) as conn:
        delivered = conn.SimpleQueue(delivered_queue)
        waiting = conn.SimpleQueue(waiting_queue)
        delivered.put({"id": "delivered"})
        waiting.put({"id": "waiting"})
        delivered.get(timeout=5).ack()
        channel = conn.default_channel
        message = channel.message_cls
        before = channel.session.query(message).filter(message.visible.is_(False)).count()
        assert before >= 1

        assert broker_delivered_purge() >= 1

        channel.session.expire_all()
        assert channel.session.query(message).filter(message.visible.is_(False)).count() == 0
        assert waiting.get(timeout=5).payload == {"id": "waiting"}
        delivered.close()
        waiting.close()


def test_it_finds_a_message_whose_body_names_an_id() -> None:
    from apps.governance.verification import broker_messages_mentioning

    url = str(app.conf.broker_url)
    needle = str(uuid.uuid4())
    queue = f"test-{uuid.uuid4()}"
    with Connection(url) as conn:
        simple = conn.SimpleQueue(queue)
        simple.put({"record_id": needle})
        try:
            assert len(broker_messages_mentioning([needle])) == 1
            assert broker_messages_mentioning([str(uuid.uuid4())]) == []
        finally:
            simple.get(timeout=5).ack()
            simple.close()
