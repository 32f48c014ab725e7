"""The primary grade `correct`: a table of crafted answers, the issue's and an adversary's, each graded as a run is."""

from __future__ import annotations

import math

import pytest

from searchbox.grading import Question, correct, grade_text, verdict
from searchbox.grading.candidates import find

CC, APACHE = ["CC-BY-NC-4.0"], ["Apache-2.0"]
SCOTT, HAN = ["Scott Martens"], ["Han Xiao"]
GANNET = ["38.4 metres", "38.4 m", "38.4"]  # as the packaged question nw01 has it
JQ004_BLOB = ('Learn what it is and how to build it. </div> <div class="kg-bookmark-metadata"> <img src="https://cms.jina.ai/content/'
              'images/icon/favicon-128x128-22.png" class="kg-bookmark-icon" /><span class="kg-bookmark-author">Jina AI</span>'
              '<span class="kg-bookmark-publisher">Han Xiao</span> </div> </div> <div c')

# (ANSWER.md, golds, question, correct?)
CASES = [
    # ---- the reproductions ----
    ("It is not Apache-2.0; it is CC-BY-NC-4.0", APACHE, "", False),  # negated gold
    ("It is not Apache-2.0; it is CC-BY-NC-4.0", CC, "", True),  # "not X; Y" where Y is gold
    ("Han Xiao? No - the author is Scott Martens", HAN, "", False),  # retracted gold
    ("Han Xiao? No - the author is Scott Martens", SCOTT, "", True),
    ("Han Xiao, Scott Martens, Alex C-G, Saba Sturua, Michael Günther, Bo Wang", SCOTT, "", False),  # shotgun of six authors
    ("It supports 32, 64, 128, 256, 512 and 768 dimensions.", ["768"], "", False),  # a list of dimensions with the gold
    ("On MTEB it scores 64.6, beating the 60.2 of its predecessor, with 137M parameters.", ["137M"], "", False),  # number among numbers
    ("The Trust welcomed 41,200 visitors in 2023, up from 36,900 in 2022.", ["41,200"], "", False),
    # ... unless the other number is in a clause dated otherwise than the question
    ("The Trust welcomed 41,200 visitors in 2023, up from 36,900 in 2022.", ["41,200"], "How many visitors in 2023?", True),
    ("41,200 or 36,900 visitors in 2023.", ["41,200"], "How many visitors in 2023?", False),
    ("41,200 visitors, or 36,900.", ["41,200"], "How many visitors in 2023?", False),
    ("It is 38.4 feet tall.", GANNET, "", False),  # wrong unit
    (JQ004_BLOB, HAN, "", False),  # the gold is the publisher of a linked page inside an HTML blob
    ("2024-04-16T16:19:47.000+02:00", ["2024-04-16"], "", True),  # the raw published_at timestamp
    ("Apache License 2.0", APACHE, "", True),
    ("Scott A. Martens", SCOTT, "", True),
    ("1.04B", ["1.04 billion"], "", True),
    ("16th April 2024", ["2024-04-16"], "", True),
    ("8,192 tokens", ["8K"], "", True),  # K as 1024 where the gold is a power-of-two multiple
    ("The model handles up to 8,192 tokens, so split long documents.", ["8K"], "", True),
    ("Han Xiao wrote it; the post draws on two sources: the card and the paper", HAN, "", True),  # inline "sources:" cuts nothing
    # ---- negation, retraction, hedges ----
    ("Not Han Xiao but Scott Martens.", SCOTT, "", True),
    ("Not Han Xiao but Scott Martens.", HAN, "", False),
    ("The author is Scott Martens, not Han Xiao.", SCOTT, "", True),
    ("Apache-2.0 is not the license; the license is CC-BY-NC-4.0.", CC, "", True),
    ("Apache-2.0 is not the license; the license is CC-BY-NC-4.0.", APACHE, "", False),
    ("Scott Martens did not write it; Han Xiao did.", HAN, "", True),
    ("Scott Martens did not write it; Han Xiao did.", SCOTT, "", False),
    ("It isn't Apache-2.0.", APACHE, "", False),
    ("It was never released under Apache 2.0.", APACHE, "", False),
    ("Neither Apache-2.0 nor MIT: it is CC BY-NC 4.0.", CC, "", True),
    ("Neither Apache-2.0 nor MIT: it is CC BY-NC 4.0.", ["MIT"], "", False),
    ("Apache-2.0 (incorrect). CC-BY-NC-4.0.", CC, "", True),
    ("Apache-2.0 (incorrect). CC-BY-NC-4.0.", APACHE, "", False),
    ("Han Xiao, no wait, Scott Martens.", SCOTT, "", True),
    ("Han Xiao no wait Scott Martens", SCOTT, "", True),
    ("Han Xiao no wait Scott Martens", HAN, "", False),
    ("Han Xiao. Actually, it is Scott Martens.", SCOTT, "", True),
    ("Han Xiao. Actually, it is Scott Martens.", HAN, "", False),
    ("No, it is Apache-2.0.", APACHE, "", True),
    ("It was released no later than 2024-04-16.", ["2024-04-16"], "", True),  # "no later than" is no negation
    ("It is not only fast: it is licensed under Apache 2.0.", APACHE, "", True),
    ("Maybe Scott Martens.", SCOTT, "", False),
    ("It could be Scott Martens.", SCOTT, "", False),
    ("Scott Martens (not sure).", SCOTT, "", False),
    ("Is it Scott Martens?", SCOTT, "", False),
    ("Scott Martens, or perhaps Han Xiao.", SCOTT, "", False),  # a hedged alternative still competes
    ("Scott Martens (maybe Han Xiao)", SCOTT, "", False),
    ("Not sure, but I think it is Scott Martens.", SCOTT, "", True),
    ("It is probably Scott Martens.", SCOTT, "", True),  # a committed answer, however worded
    ("Either Han Xiao or Scott Martens.", SCOTT, "", False),
    ("It is either CC-BY-NC-4.0 or Apache-2.0.", CC, "", False),
    ("The answer is not in the documents.", ["Tobias Wren"], "", False),
    ("I could not find the author; Scott Martens is a guess.", SCOTT, "", False),
    # ---- several candidates of the gold's type ----
    ("- Scott Martens\n- Han Xiao", SCOTT, "", False),  # markdown bullets are one answer
    ("The authors are:\n\n- Scott Martens\n- Han Xiao", SCOTT, "", False),
    ("The author is:\n\n- Scott Martens\n\nHe writes about embeddings.", SCOTT, "", True),
    ("Scott Martens and Han Xiao co-wrote it.", SCOTT, "", False),
    ("Scott Martens\nHan Xiao\nAlex C-G", SCOTT, "", False),  # alternatives line by line: all offered
    ("Scott Martens\n\n**Han Xiao**", SCOTT, "", False),
    ("Scott Martens\n\nHe also co-wrote two posts with Han Xiao.", SCOTT, "", True),  # prose after the answer line is context
    ("Scott Martens\n\nScott Martens", SCOTT, "", True),
    ("2024-04-16\n\npublished_at: 2024-04-16T16:19:47.000+02:00", ["2024-04-16"], "", True),
    ("2024-04-16\n2024-04-18", ["2024-04-16"], "", False),
    ("Published on 2024-04-16, updated 2024-05-02 and reposted 2024-06-01.", ["2024-04-16"], "", False),  # several dates
    ("Released 2024-04-18 (the blog post came on 2024-04-20).", ["2024-04-18"], "", False),
    ("Apache-2.0 for the code, CC-BY-NC-4.0 for the weights.", CC, "", False),  # several licenses
    ("137M or 161M parameters.", ["137M"], "", False),
    ("137M, not 161M.", ["137M"], "", True),
    ("161M, not 137M.", ["137M"], "", False),
    ("jina-colbert-v2 or jina-colbert-v1-en", ["jina-colbert-v2"], "", False),  # several model ids
    ("It is 768 (512 and 256 with Matryoshka truncation).", ["768"], "", False),
    ("Little Vell, first lit in 1856.", ["Little Vell, 1856", "Little Vell"], "", True),
    ("Little Vell, first lit in 1860.", ["Little Vell, 1856", "Little Vell"], "", False),
    ("Little Vell in 1856 and Skerrow Point in 1870.", ["Little Vell, 1856", "Little Vell"], "", False),
    # ---- numbers about something else do not compete ----
    ("It has 137M parameters and handles 8,192 tokens.", ["137M"], "", True),
    ("It outputs 768-dimensional vectors for inputs of up to 8,192 tokens.", ["768"], "", True),
    ("Two of the twelve lighthouses are closed.", ["2", "two"], "", True),
    ("412,000 pounds (about $520,000).", ["412,000 pounds", "412000"], "", True),
    ("38.4 metres, built in 1856 for 12,000 pounds.", GANNET, "", True),
    ("The tower is 38.4 metres tall (126 feet).", GANNET, "", True),  # the same height in feet agrees
    ("The tower is 38.4 metres tall, 41 metres with the mast.", GANNET, "", False),
    # ---- wrong units, values, precision ----
    ("It is 38.4 km from the shore.", GANNET, "", False),
    ("It is 38.4 kg.", GANNET, "", False),
    ("It is 138.4 metres tall.", GANNET, "", False),
    ("It cost $412,000.", ["412,000 pounds", "412000", "412,000"], "", False),
    ("It cost £412,000.", ["412,000 pounds"], "", True),
    ("jina-reranker-v3 is a 0.6B parameter reranker.", ["597M"], "", False),  # coarser than the gold: agrees, asserts nothing
    ("jina-reranker-v3 has 597M parameters (about 0.6B).", ["597M"], "", True),
    ("ReaderLM-v2 has 1.5B parameters.", ["1.54B"], "", False),
    ("It has 1,543,714,304 parameters.", ["1.54B"], "", True),  # more precise, rounds to the gold
    ("April 2024", ["2024-04-16"], "", False),
    ("2023", ["2024-04-16"], "", False),
    ("Released 2024-04-17.", ["2024-04-16"], "", False),
    ("CC BY-NC-SA 4.0", CC, "", False),
    ("CC-BY-4.0", CC, "", False),
    # ---- format variants pass ----
    ("Tuesday, 16th April 2024", ["2024-04-16"], "", True),
    ("16/04/2024", ["2024-04-16"], "", True),
    ("It was published on April 16, 2024 at 16:19.", ["2024-04-16"], "", True),
    ("published_at: 2024-04-16T16:19:47.000+02:00", ["2024-04-16"], "", True),
    ("Creative Commons Attribution Non Commercial 4.0", CC, "", True),
    ("Creative Commons Attribution-NonCommercial 4.0 International", CC, "", True),
    ("Licensed under CC BY-NC 4.0 (non-commercial use only).", CC, "", True),
    ("The Apache License, Version 2.0", APACHE, "", True),
    ("Qwen Research License", ["Qwen Research License"], "", True),
    ("It is under the qwen research license.", ["Qwen Research License"], "", True),
    ("1.04 billion parameters", ["1.04B"], "", True),
    ("0.597B", ["597M"], "", True),
    ("597 million", ["597M"], "", True),
    ("597,000,000 parameters", ["597M"], "", True),
    ("1 billion", ["1.0B"], "", True),
    ("8K", ["8192"], "", True),
    ("8k tokens", ["8K"], "", True),
    ("32,768", ["32K"], "", True),
    ("131,072 tokens", ["131K"], "", True),
    ("41.2 thousand", ["41,200"], "", True),
    ("38.40 m", GANNET, "", True),
    ("38.4m", GANNET, "", True),
    ("Two lighthouses are closed.", ["2", "two"], "", True),
    ("Xiao Han", HAN, "", True),
    ("Dr. Han Xiao, CEO of Jina AI", HAN, "", True),
    ("Scott Martens of Jina AI wrote it.", SCOTT, "", True),
    ("By Scott Martens", SCOTT, "", True),
    ("Written by: Scott Martens", SCOTT, "", True),
    ("the author is scott martens", SCOTT, "", True),
    ("TOBIAS WREN led the restoration.", ["Tobias Wren"], "", True),
    ("Michael Gunther", ["Michael Günther"], "", True),
    ("**Answer:** `Apache-2.0`\n\nSources: jina-clip-v1.md", APACHE, "", True),
    ("# Scott Martens", SCOTT, "", True),
    ("```\nApache-2.0\n```", APACHE, "", True),
    ("| License | Apache-2.0 |", APACHE, "", True),
    ("<b>Scott Martens</b>", SCOTT, "", True),
    ("Engineering Group", ["Engineering Group"], "", True),
    ("The Jina AI Engineering Group wrote it.", ["Engineering Group"], "", True),
    ("jina embeddings v3", ["jina-embeddings-v3"], "", True),
    # ---- what the question already says is no competing claim ----
    ("jina-colbert-v2, which superseded jina-colbert-v1-en, has 560M parameters.", ["560M"],
     "The model jina-colbert-v1-en has been superseded. What is the parameter count of the model that superseded it?", True),
    ("The article \"Jina Reranker v3: 0.6B Listwise Reranker\" announced a model with 597M parameters.", ["597M"],
     "The article \"Jina Reranker v3: 0.6B Listwise Reranker\" announced a model. What is its parameter count?", True),
    ("Alex C-G wrote \"Search PDFs with AI and Python: Part 3\".", ["Alex C-G"],
     "Who is the author of the article \"Search PDFs with AI and Python: Part 3\"?", True),
    # ---- nothing to grade ----
    ("", SCOTT, "", False),
    ("I don't know.", SCOTT, "", False),
    ("Scott", SCOTT, "", False),
]


@pytest.mark.parametrize("answer,golds,question,expected", CASES)
def test_correct_table(answer, golds, question, expected):
    q = Question("q", question, golds[0], golds[1:])
    got = grade_text(answer, q)["correct"]
    assert got == float(expected), verdict(answer, golds, question).as_dict()


def test_the_table_is_large_and_two_sided():
    assert len(CASES) >= 100
    assert sum(1 for c in CASES if c[3]) >= 40 and sum(1 for c in CASES if not c[3]) >= 40


def test_contains_stays_lenient_where_correct_refuses():
    """The lenient grade credits what the strict one refuses; never the reverse on these."""
    lenient = [c for c in CASES if not c[3] and grade_text(c[0], Question("q", c[2], c[1][0], c[1][1:]))["contains"] == 1.0]
    assert len(lenient) >= 20  # negations, shotguns, hedges: contains says 1, correct says 0


def test_missing_gold_is_missing():
    assert math.isnan(correct("Scott Martens", []))
    g = grade_text("Scott Martens", Question("q", "?", ""))
    assert g["correct"] is None and g["correct_reason"] == "no gold answer"
    assert "beside other candidates: Han Xiao" in grade_text("Scott Martens, Han Xiao", Question("q", "?", "Scott Martens"))["correct_reason"]


def test_verdict_says_why():
    v = verdict("Han Xiao, Scott Martens", SCOTT)
    assert v.value == 0.0 and v.contradicting == ["Han Xiao"] and "beside other candidates" in v.reason
    v = verdict("It is not Apache-2.0", APACHE)
    assert v.denied == ["Apache-2.0"] and v.asserted == []
    v = verdict("Maybe Scott Martens", SCOTT)
    assert v.offered == ["Scott Martens"] and "offered or denied" in v.reason
    assert verdict("Scott Martens", SCOTT).as_dict()["correct"] == 1.0


@pytest.mark.parametrize("text,kinds", [
    ("jina-embeddings-v3 has 570M parameters", ["model", "number"]),
    ("Released on Tuesday, 16th April 2024 under CC BY-NC 4.0 by Scott A. Martens of Jina AI",
     ["date", "license", "person", "entity"]),
    ("Part 3, v2, [1], #4, top 10, 1st, 3D, 3.1.2", []),  # labels, ordinals, versions, glued digits: no numbers
    ("in 2024, 2048 dimensions", ["date", "number"]),  # a bare year is a date; a count of something is a number
])
def test_candidate_kinds(text, kinds):
    assert [c.kind for c in find(text)] == kinds


def test_every_packaged_gold_in_the_corpus_formats():
    """Each packaged question: its gold and aliases pass, negated they fail, and the raw front-matter value its gold
    comes from (a published_at timestamp, a license id, "8K", an author) passes as an answer, alone or as `field: value`."""
    import json
    import re
    import zipfile
    from pathlib import Path

    builtin = Path(__file__).resolve().parents[1] / "searchbox" / "builtin"
    corpus = zipfile.ZipFile(builtin / "jina-corpus.zip")
    files = {n.rsplit("/", 1)[-1]: n for n in corpus.namelist()}
    field_of = {"post_date": "published_at", "post_author": "authors", "card_release_date": "release_date", "card_parameters": "parameter_size",
                "card_license": "license", "card_input_length": "token_length", "card_dimension": "output_dimension"}
    failures, raw_checked = [], 0
    for line in (builtin / "jina-questions.jsonl").read_text().splitlines():
        raw_q = json.loads(line)
        q = Question(raw_q["id"], raw_q["question"], raw_q["answer"], raw_q.get("aliases", []))
        for gold in q.golds:
            if grade_text(gold, q)["correct"] != 1.0 or grade_text(f"It is not {gold}.", q)["correct"] != 0.0:
                failures.append((q.id, gold))
        field = field_of.get(raw_q.get("template"))
        if field:
            m = re.search(rf"^{field}:\s*(.*)$", corpus.read(files[raw_q["gold_files"][0]]).decode(), re.M)
            value = m.group(1).strip().strip('"')
            raw_checked += 1
            failures += [(q.id, a) for a in (value, f"{field}: {value}") if grade_text(a, q)["correct"] != 1.0]
    assert raw_checked >= 100 and not failures, failures[:20]
