"""Measure the relevance floor of an embedding model on a small labelled set.

Run: ``python -m benchmarks.relevance_floor [model]`` (default ``hashing-256``). No
database: the floor is a property of the model's vectors alone.

The set (below) is memory contents as the write path renders them (``key: value``), queries
labelled with the record they are about (written as an agent would ask: sharing a word, a
stem or a spelling with it, not its text), and nonsense queries made of words no record
holds. For each nonsense query the script takes its highest cosine similarity to any record
(what a floor must stay above), and for each relevant query the similarity to its record
(what a floor should keep). It prints both distributions and the floor it suggests: the
highest nonsense similarity plus a margin of 0.05, rounded up to a multiple of 0.05. A
relevant query below the floor is still found when it shares a word with its record (a hit
matches by its text or by its vector). docs/performance.md records the figures it gave.
"""

from __future__ import annotations

import math
import sys

import numpy as np

RECORDS = [
    "answer.style: short",
    "answer.style: complete, with citations",
    "shipping.preference: carrier_a",
    "shipping.preference: express courier to the office",
    "travel.seat: prefers window seats",
    "travel.meal: vegetarian meals on long flights",
    "billing.currency: EUR",
    "billing.invoice_email: invoices to accounts payable",
    "language.preferred: German for contracts",
    "support.channel: email rather than phone",
    "legal.jurisdiction: contracts governed by Irish law",
    "order.limit: at most 5000 per order without approval",
    "notification.quiet_hours: no calls after 18:00",
    "account.tier: gold customer since 2019",
    "delivery.window: mornings only on weekdays",
    "payment.method: corporate card ending 4421",
    "review.depth: full clause by clause review",
    "refund.policy: store credit accepted",
    "timezone: Europe/Dublin",
    "greeting.name: call her Dr. Byrne",
]
RELEVANT = [
    ("answer style", 0),
    ("short answers", 0),
    ("complete answers with citations", 1),
    ("which carrier ships", 2),
    ("express courier", 3),
    ("window seat", 4),
    ("vegetarian meal", 5),
    ("currency for billing", 6),
    ("where do invoices go", 7),
    ("contract language", 8),
    ("support by email", 9),
    ("which law governs the contract", 10),
    ("order approval limit", 11),
    ("quiet hours for calls", 12),
    ("gold tier", 13),
    ("delivery mornings", 14),
    ("corporate card payment", 15),
    ("clause review depth", 16),
    ("refund as store credit", 17),
    ("dublin timezone", 18),
    ("how to greet Byrne", 19),
    ("shiping carrier", 2),
    ("vegetarien meals", 5),
    ("invoice emails", 7),
]
NONSENSE = [
    "xylophone",
    "quasar nebula",
    "purple elephant dancing",
    "zebra",
    "origami swan",
    "volcanic basalt",
    "saxophone solo",
    "pineapple pizza",
    "kangaroo marsupial",
    "glacier",
    "tornado siren",
    "chess gambit",
    "mandolin strings",
    "lunar eclipse",
    "octopus ink",
    "bicycle chain grease",
    "snowflake crystal",
    "harpsichord",
    "meteorite crater",
    "jellyfish bloom",
]


def measure(model: str) -> dict[str, float]:
    from apps.derivations.embedders import get_embedder

    embedder = get_embedder(model)
    records = np.asarray(embedder.embed(RECORDS))
    relevant = np.asarray(embedder.embed([q for q, _ in RELEVANT]))
    nonsense = np.asarray(embedder.embed(NONSENSE))
    kept = sorted(float(relevant[i] @ records[t]) for i, (_, t) in enumerate(RELEVANT))
    noise = sorted(float((nonsense[i] @ records.T).max()) for i in range(len(NONSENSE)))
    suggested = math.ceil(round((noise[-1] + 0.05) * 20, 6)) / 20
    return {
        "nonsense_max": noise[-1],
        "nonsense_p50": noise[len(noise) // 2],
        "relevant_min": kept[0],
        "relevant_p10": kept[len(kept) // 10],
        "relevant_p50": kept[len(kept) // 2],
        "suggested_floor": suggested,
        "relevant_kept_at_floor": sum(1 for v in kept if v >= suggested) / len(kept),
        "nonsense_passing_floor": sum(1 for v in noise if v >= suggested) / len(noise),
    }


def measure_client(dimension: int) -> dict[str, float]:
    """A ``client-<dim>`` model is the agent's own: the server cannot embed a labelled set
    with it. What it can measure is noise: the cosine similarity of unrelated vectors
    (independent random directions) in that dimension, which a floor must stay above."""
    rng = np.random.default_rng(7)
    records = rng.standard_normal((2000, dimension))
    queries = rng.standard_normal((500, dimension))
    records /= np.linalg.norm(records, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    noise = np.sort((queries @ records.T).max(axis=1))
    suggested = math.ceil(round((float(noise[-1]) + 0.05) * 20, 6)) / 20
    return {
        "unrelated_max": float(noise[-1]),
        "unrelated_p50_of_max": float(noise[len(noise) // 2]),
        "suggested_floor": suggested,
    }


def main() -> None:
    import django

    from memoryconsole import instance

    instance.setup()
    django.setup()
    model = sys.argv[1] if len(sys.argv) > 1 else "hashing-256"
    kind, _, arg = model.partition("-")
    figures = measure_client(int(arg)) if kind == "client" else measure(model)
    for name, value in figures.items():
        print(f"{name:24s} {value:.3f}")


if __name__ == "__main__":
    main()
