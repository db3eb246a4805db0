"""Attributed answers (issue 41): the corpus's ids and links, the architectures' rules, their bad settings,
and an evaluation run with every architecture on the cardano pool (real MiniLM retrieval, tiny random T5
judge), whose lines, results.md, export and probabilities are checked against the judge run by hand."""

from __future__ import annotations

import json

import pytest
import yaml
from evaluation_workspace import write_workspace

from graphctx.errors import ConfigError
from graphctx.evaluation.attribution.architectures import (
    OUT_OF_RANGE,
    ArchitectureContext,
    AttributionRow,
    Choice,
    architectures,
    cited_choice,
)
from graphctx.evaluation.attribution.corpus import Corpus, Passage, dataset_site, sentence_passage, site_host
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.knowledge.budget import QAPair
from graphctx.knowledge.provenance import sourced_facts
from graphctx.knowledge.sparql import KGFact
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import Sentence
from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.registry import BUILT_IN as BUILT_IN_RETRIEVERS

LIMIT = 512
"""The judge's input limit here: of the two questions' posts, one is judged and one is over (~1,060 tokens),
so both paths run, in seconds."""
KEYS = {
    "architecture",
    "passage",
    "link",
    "text",
    "probability",
    "judge_in_system",
    "unattributed",
    "out_of_range",
}
RETRIEVERS = ArchitectureContext(tuple(cls.name for cls in BUILT_IN_RETRIEVERS))
ARCHITECTURES = [
    {"class_path": "rtr"},
    {"class_path": "posthoc", "init_args": {"k": 3}},
    {"class_path": "autoais_rerank", "init_args": {"retriever": "dense", "k": 2}},
]


def test_site_hosts_and_links():
    assert site_host("askubuntu") == "askubuntu.com"
    assert site_host("unix") == "unix.stackexchange.com"
    assert site_host("unix.stackexchange.com") == "unix.stackexchange.com"
    assert site_host(None) is None
    # graphctx serve links its neighbours through the same rule (it once linked askubuntu.stackexchange.com)
    from types import SimpleNamespace

    from graphctx.evaluation.attribution.corpus import config_host

    dump = SimpleNamespace(data=SimpleNamespace(dataset=SimpleNamespace(source="dumps/askubuntu", site=None)))
    assert config_host(dump) == "askubuntu.com"
    assert dataset_site("../shared/data/stackexchange/cardano", None) == "cardano"
    assert dataset_site("hf:owner/name", None) is None
    corpus = Corpus({7: {"question": "Q?", "answer": "A."}}, "cardano")
    assert corpus.post(7) == Passage(
        "post:7", "Question: Q?\nAnswer: A.", "https://cardano.stackexchange.com/q/7"
    )
    assert Corpus({}, None).context([QAPair("Q", "A", 3)], []) == [
        Passage("post:3", "Question: Q\nAnswer: A")
    ]


def test_kg_sentences_have_the_facts_ids_and_extracted_ones_their_labels():
    fact = KGFact("Q1", "Cardano", "P31", "instance of", "Q2", "blockchain")
    sourced = sourced_facts([("kg:local", fact)])
    stated = Sentence(sourced[0].sentence, Triplet("Cardano", "instance of", "blockchain", "kg:local"))
    assert sentence_passage(stated, sourced).id == "kg:Q1|P31|Q2"
    extracted = Sentence("Daedalus uses Haskell.", Triplet("Daedalus", "uses", "Haskell", "spacy@pair=0"))
    assert sentence_passage(extracted, sourced) == Passage("triplet:Daedalus|uses|Haskell", extracted.text)


def row(marks, passages=3):
    context = [Passage(f"post:{n}", f"text {n}") for n in range(1, passages + 1)]
    return AttributionRow("q", "a", context, marks, "predictions of TextGen, row 5")


def test_rtr_takes_the_passage_cited_most_often_ties_the_first_cited():
    assert cited_choice(row([[2], [3, 1], [3]])).passage.id == "post:3"
    assert cited_choice(row([[2, 1], [1, 2]])).passage.id == "post:2"


def test_rtr_counts_a_sentence_with_an_out_of_range_mark_as_unsupported_and_goes_on():
    # ALCE: a sentence naming a missing passage is unsupported, its marks name nothing
    kept = cited_choice(row([[4, 2], [1], [3, 9]]))
    assert kept.passage.id == "post:1" and kept.out_of_range == 2 and kept.unattributed is None
    lost = cited_choice(row([[4], [0, 1]]))
    assert lost == Choice(None, 0.0, OUT_OF_RANGE, 2)


def test_rtr_reads_the_lines_citations_over_the_prompts_passages():
    from graphctx.evaluation.attribution.architectures import RetrieveThenRead
    from graphctx.evaluation.attribution.attributor import row_of
    from graphctx.prompts import Prompt

    corpus = Corpus({}, "askubuntu")
    fact = Sentence(
        "Ubuntu is an operating system.", Triplet("Ubuntu", "instance of", "operating system", "kg:x")
    )
    prompt = Prompt("q", (QAPair("Q1", "A1", 11), QAPair("Q2", "A2", 12)), (fact,))
    line = {
        "id": 1,
        "question": "q",
        "generated": "a [3]. b [2][3].",
        "citations": [{"sentence": "a.", "passages": [3]}, {"sentence": "b.", "passages": [2, 3]}],
    }
    rtr = RetrieveThenRead(RETRIEVERS)
    cited = rtr.choose([row_of(line, prompt, [], corpus, "here")], None)[0].passage
    assert cited.id == "triplet:Ubuntu|instance of|operating system" and cited.link is None
    uncited = rtr.choose([row_of({**line, "citations": None}, prompt, [], corpus, "here")], None)[0]
    assert uncited.passage.link == "https://askubuntu.com/q/11"  # no marks: the top pair shown
    line["citations"][1]["passages"] = [4]
    line["citations"][0]["passages"] = [5]
    lost = rtr.choose([row_of(line, prompt, [], corpus, "here")], None)[0]
    assert lost == Choice(None, 0.0, OUT_OF_RANGE, 2)  # the run goes on; the row is unattributed


@pytest.mark.parametrize(
    ("init_args", "message"),
    [
        ({"retriever": None}, "evaluation.attribution: posthoc names no retriever; choose from"),
        ({"retriever": "tfidf"}, "evaluation.attribution: posthoc: unknown retriever 'tfidf'; choose from"),
        ({"k": 0}, "evaluation.attribution: posthoc: k must be an integer of at least 1, got 0"),
    ],
)
def test_bad_architecture_settings_are_one_line(init_args, message):
    with pytest.raises(ConfigError) as error:
        architectures([{"class_path": "posthoc", "init_args": init_args}], RETRIEVERS)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.fixture(scope="module")
def run(tmp_path_factory, cardano_dir, tiny_bert, tiny_t5):
    """ZeroShot, TextGen and AnswerBot answered (with their attributions) on 2 questions by every
    architecture, as evaluate.py's answers stage writes them (the scores stage left out: seconds)."""
    root = tmp_path_factory.mktemp("attribution")
    evaluation = {
        "output_dir": str(root / "out"),
        "limit": 2,
        "bootstrap_samples": 50,
        "variants": ["ZeroShot", "TextGen", "AnswerBot"],
        "attribution": ARCHITECTURES,
    }
    metrics = {"autoais": {"model": str(tiny_t5), "max_input_tokens": LIMIT}}
    path = write_workspace(
        root,
        cardano_dir,
        tiny_bert,
        "attribution.yaml",
        evaluation,
        generation={"max_new_tokens": 4, "batch_size": 2, "max_prompt_tokens": 320},
    )
    settings = yaml.safe_load(path.read_text())
    settings["evaluation"]["metrics"] |= metrics
    path.write_text(yaml.safe_dump(settings))
    config = load_config(path)
    evaluation = MatrixEvaluation(config, log=lambda message: None)
    evaluation.prepare(overwrite=False)
    rows = evaluation.load_rows()
    evaluation.generate(rows, evaluation.build_contexts(rows))
    return config, root / "out", [int(row["id"]) for row in rows]


@pytest.mark.slow
def test_every_line_has_one_attribution_per_architecture(run):
    config, out, _ = run
    pool = {int(r["id"]) for r in config.load_dataset()["train"]}
    for variant in ("ZeroShot", "TextGen", "AnswerBot"):
        for line in read_records(out / "predictions" / f"{variant}.jsonl"):
            found = line["attributions"]
            assert all(set(a) == KEYS and isinstance(a["passage"], str) for a in found)
            if variant == "ZeroShot":  # no context: nothing for rtr to attribute to, no entry
                assert [a["architecture"] for a in found] == ["posthoc", "autoais_rerank"]
                found = [None, *found]
            else:
                assert [a["architecture"] for a in found] == ["rtr", "posthoc", "autoais_rerank"]
            rtr, posthoc, rerank = found
            for a in (posthoc, rerank):  # every variant, ZeroShot included, gets a post-hoc attribution
                assert int(a["passage"].removeprefix("post:")) in pool
                assert a["link"] == f"https://cardano.stackexchange.com/q/{a['passage'][5:]}"
                assert a["probability"] is None or 0 <= a["probability"] <= 1
            assert not posthoc["judge_in_system"] and rerank["judge_in_system"]
            if variant == "TextGen":  # the top retrieved pair shown
                assert rtr["passage"] == f"post:{line['retrieved_ids'][0]}"


def test_probabilities_are_the_judges_and_the_rerank_takes_the_most_probable(run, tiny_t5):
    from graphctx.evaluation.attribution.attributor import JudgeAndRetrievers
    from graphctx.evaluation.attribution.corpus import dataset_site
    from graphctx.metrics.judges import build_judge

    config, out, _ = run
    autoais = config.evaluation.metrics.autoais
    judge = build_judge(autoais, device="cpu")
    pool = {int(r["id"]): r for r in config.load_dataset()["train"]}
    corpus = Corpus(pool, dataset_site(config.data.dataset.source, config.data.dataset.site))
    tools = JudgeAndRetrievers(corpus, config.retrieval, autoais, config.cache_dir, "cpu", judge)
    lines = read_records(out / "predictions" / "TextGen.jsonl")
    judged = [check_line(line, judge, tools, corpus, autoais.hypothesis_template) for line in lines]
    assert sorted(judged) == [False, True]  # one row's post-hoc passage judged, the other's over the limit


def check_line(line, judge, tools, corpus, template) -> bool:
    """The line's post-hoc probability and rerank choice, recomputed; whether its post-hoc one was judged."""
    hypothesis = template.format(question=line["question"], answer=line["generated"])
    posthoc, rerank = line["attributions"][1:]
    if posthoc["probability"] is None:  # not judged: over the judge's limit
        assert judge.input_lengths([posthoc["text"]], [hypothesis])[0] > LIMIT
    else:
        _, soft = judge.judge([posthoc["text"]], [hypothesis])
        assert posthoc["probability"] == pytest.approx(soft.item(), abs=1e-6)
    top = tools.retrieve("dense", 2, [f"{line['question']}\n{line['generated']}"])[0]
    passages = [corpus.post(hit.id).text for hit in top]
    lengths = judge.input_lengths(passages, [hypothesis] * len(top))
    within = [i for i in range(len(top)) if lengths[i] <= LIMIT]
    if not within:  # none within the limit: the top-1, not judged
        assert (rerank["passage"], rerank["probability"]) == (f"post:{top[0].id}", None)
    else:
        _, soft = judge.judge([passages[i] for i in within], [hypothesis] * len(within))
        best = max(range(len(within)), key=lambda j: (soft[j].item(), -within[j]))
        assert rerank["passage"] == f"post:{top[within[best]].id}"
        assert rerank["probability"] == pytest.approx(soft[best].item(), abs=1e-6)
    return posthoc["probability"] is not None


def test_results_and_export_show_the_attributions(run):
    from graphctx.evaluation.attribution.report import run_section
    from graphctx.evaluation.matrix.export import variant_values

    config, out, ids = run
    labels = {"ZeroShot": "Zero-shot", "TextGen": "TextGen", "AnswerBot": "AnswerBot"}
    files = {label: out / "predictions" / f"{name}.jsonl" for name, label in labels.items()}
    section = run_section(config, files, ids)
    assert section.startswith("## Attribution") and "`posthoc`: top-1 of dense retrieval" in section
    assert "| TextGen | rtr |" in section and "| Zero-shot | rtr | n/a | | 0/2 |" in section
    assert "| AnswerBot | autoais_rerank | judge in system: AutoAIS not reported |" in section
    line = read_records(files["TextGen"])[0]
    meta = json.loads((out / "predictions" / "TextGen.meta.json").read_text())
    values = variant_values("TextGen", line, meta["settings"])
    posthoc = line["attributions"][1]
    assert values["TextGen/attribution/posthoc/link"] == posthoc["link"]
    assert {key for key in values if "/attribution/" in key} == {
        f"TextGen/attribution/{a}/{key}"
        for a in ("rtr", "posthoc", "autoais_rerank")
        for key in KEYS - {"architecture"}
    }


def test_graphctx_answer_lists_each_source():
    from graphctx.commands.answer import source_line

    post = {"architecture": "posthoc", "passage": "post:7", "link": "https://cardano.stackexchange.com/q/7"}
    assert source_line({**post, "text": "", "probability": 0.25, "judge_in_system": False}) == (
        "posthoc: https://cardano.stackexchange.com/q/7 (p(entail) = 0.250)"
    )
    fact = {
        "architecture": "rtr",
        "passage": "kg:Q1|P31|Q2",
        "link": None,
        "text": "Cardano is a blockchain.",
    }
    assert source_line({**fact, "probability": None, "judge_in_system": False}) == (
        "rtr: kg:Q1|P31|Q2: Cardano is a blockchain. (not judged)"
    )
    rerank = {**post, "architecture": "autoais_rerank", "text": "", "judge_in_system": True}
    assert source_line({**rerank, "probability": 0.5}).endswith("(chosen by the judge, p(entail) = 0.500)")
