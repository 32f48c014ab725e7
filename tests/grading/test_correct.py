"""The primary grade `correct`: a table of crafted answers, the issue's and an adversary's, each graded as a run is."""

from __future__ import annotations

import math

import pytest

from searchbox.grading import Question, contains, correct, grade_text, verdict
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
    ("It was released no later than 2024-04-16.", ["2024-04-16"], "", False),  # no negation, but a deadline: a bound, not the date
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

S, H = SCOTT, HAN
DSPY_Q = 'Who is the author of the article "DSPy: Not Your Average Prompt Engineering"?'
ROMANCE_Q = "Who is the author of the article \"Is Romance Generative AI's Killer App? We Hope Not\"?"
# An adversary's second round (issue 19 review): the author's known doubts, other corpora and gold types. Each row decided:
# a shotgun, a hedge, a bound, a superset or a wrong unit fails; a format variant or a sentence around the gold passes.
CASES += [
    # ---- the author's known doubts ----
    ("Based on the documents, I found the following\nScott Martens", S, "", True),  # a preamble line without a colon
    ("After reading the post, the answer is clear.\nScott Martens", S, "", True),
    ("Let me check.\n\nScott Martens\n\nHan Xiao", S, "", False),  # past the preamble, alternatives still compete
    ("I could not find the answer.\nScott Martens", S, "", False),  # a line that says it found nothing is no preamble
    ("Possible authors\nScott Martens\nHan Xiao", S, "", False),
    ("## Who wrote the article?\n\nScott Martens", S, "Who wrote the article?", True),  # a heading restating the question
    ('## Who wrote "DSPy: Not Your Average Prompt Engineering"?\n\nHan Xiao', H, DSPY_Q, True),
    ("There is no author other than Scott Martens.", S, "", True),  # double negation: the exception is asserted
    ("No one other than Scott Martens wrote it.", S, "", True),
    ("No one but Scott Martens", S, "", True),
    ("None other than Scott Martens.", S, "", True),
    ("Nobody except Scott Martens wrote it.", S, "", True),
    ("It was never released under anything other than Apache 2.0.", APACHE, "", True),
    ("No one except Han Xiao; Scott Martens", S, "", False),
    ("Engineering Group and Scott Martens", S, "", False),  # names compete when joined as alternatives
    ("Jina AI Engineering Group and Scott Martens", S, "", False),
    ("Jina AI, Scott Martens", S, "", True),  # a comma alone is an apposition (an affiliation), not a list
    ("scott martens and han xiao", S, "", False),  # lower-case names are read as names beside a lower-case gold
    ("the authors are scott martens, han xiao", S, "", False),
    ("jina-embeddings-v3 has 570M parameters; the large one has 1.3B parameters.", ["570M"], "", False),  # left: see the README
    # ---- supersets, lists, negation shapes ----
    ("Scott Martens and Han Xiao", S, "", False),
    ("Scott Martens with help from Han Xiao", S, "", False),
    ("Scott Martens & Han Xiao", S, "", False),
    ("Scott Martens/Han Xiao", S, "", False),
    ("Scott Martens and others", S, "", False),  # a single author is no team
    ("Scott Martens et al.", S, "", False),
    ("Scott Martens and his team", S, "", False),
    ("- Han Xiao\n- Engineering Group", H, "", False),  # list items compete, a person and an entity too (jq093)
    ("Han Xiao\nEngineering Group", H, "", False),
    ("Engineering Group\nScott Martens", ["Engineering Group"], "", False),
    ("Scott Martens wrote it; Jina AI published it.", S, "", True),  # prose after a semicolon is no list item
    ("Scott Martens is not the author.", S, "", False),
    ("Scott Martens (not)", S, "", False),  # a lone "not" takes back what came before
    ("Scott Martens - NOT", S, "", False),
    ("Scott Martens. Just kidding, Han Xiao.", S, "", False),
    ("Scott Martens (allegedly)", S, "", False),
    ("Scott Martens and han xiao", S, "", False),  # a lower-case name beside a capitalised gold
    ("The author is Scott Martens and nobody else.", S, "", True),
    ("Written by Scott Martens and published in 2024.", S, "", True),
    ("No one but Han Xiao or Scott Martens", S, "", False),
    ("I have no idea, other than perhaps Scott Martens", S, "", False),
    ("Not Scott Martens.", S, "", False),
    ("It wasn't written by Scott Martens.", S, "", False),
    ("Nobody named Scott Martens wrote it.", S, "", False),
    ("I doubt it is Scott Martens.", S, "", False),
    ("It is unlikely to be Scott Martens.", S, "", False),
    ("There is no doubt: Scott Martens.", S, "", True),
    ("Either Scott Martens or someone else.", S, "", False),
    ("Scott Martens is often credited, but it is actually Han Xiao.", S, "", False),
    ("Han Xiao, not Scott Martens", S, "", False),
    ("Han Xiao rather than Scott Martens", S, "", False),
    ("Scott Martens? Han Xiao!", S, "", False),
    ("~~Scott Martens~~ Han Xiao", S, "", False),  # struck through: taken back
    ("~~Han Xiao~~ Scott Martens", S, "", True),
    ("I cannot confirm that Scott Martens wrote it.", S, "", False),
    ("Scott Martens and/or Han Xiao", S, "", False),
    ("Possibly:\nScott Martens", S, "", False),  # a hedged lead-in hedges what it introduces
    ("The author could be one of these:\n- Scott Martens", S, "", False),
    ("I am not sure, but the author is:\n- Scott Martens", S, "", True),
    ("Scott Martens, I think.", S, "", True),
    ("Scott Martens is the author (not Han Xiao, who edited it).", S, "", True),
    ("Author: *Scott Martens*", S, "", True),
    ("> Scott Martens", S, "", True),
    ("Mr. Martens", S, "", False),
    ("S. Martens", S, "", False),
    # ---- titles restated from the question: their words are no claim (jq010, jq085, jq179 ...) ----
    ('The author of "DSPy: Not Your Average Prompt Engineering" is Han Xiao.', H, DSPY_Q, True),
    ('The author of "DSPy: Not Your Average Prompt Engineering" is Scott Martens.', H, DSPY_Q, False),
    ('Han Xiao wrote "Is Romance Generative AI\'s Killer App? We Hope Not".', H, ROMANCE_Q, True),
    ('It is "not" Apache-2.0', APACHE, "", False),  # scare quotes around a negation are no title
    ('It is "not under the Apache" license', APACHE, "", False),
    ('The author is "Han Xiao and Scott Martens"', S, "", False),  # names inside a title that is no echo still compete
    ('Han Xiao wrote "Why Not Both? A Study".', H, "", True),  # a capitalised title of three words or more negates nothing
    ('"No. You Can\'t Use Reranker to Improve SEO" was written by Han Xiao.', H,
     'Who is the author of the article "No. You Can\'t Use Reranker to Improve SEO"?', True),
    # ---- dates: bounds, ranges, approximations, periods ----
    ("Before 2024-04-16.", ["2024-04-16"], "", False),
    ("After 2024-04-16.", ["2024-04-16"], "", False),
    ("By 2024-04-16", ["2024-04-16"], "", False),
    ("Some time after 16 April 2024", ["2024-04-16"], "", False),
    ("2024-04-16 at the latest", ["2024-04-16"], "", False),
    ("Between 2024-04-16 and 2024-04-18", ["2024-04-16"], "", False),
    ("From 2024-04-16 to 2024-04-18", ["2024-04-16"], "", False),
    ("Released 2024-04-16, after the 2024-03-01 beta.", ["2024-04-16"], "", True),  # the beta's date is a bound of another event
    ("Around 2024-04-16.", ["2024-04-16"], "", True),  # an approximation states the value
    ("circa 1856", ["1856"], "", True),
    ("c. 1856", ["1856"], "", True),
    ("Not until 1856.", ["1856"], "", True),
    ("mid-1856", ["1856"], "", True),  # finer than the gold, inside it
    ("16 April", ["2024-04-16"], "", False),
    ("April 16, 2025", ["2024-04-16"], "", False),
    ("the sixteenth of April 2024", ["2024-04-16"], "", True),  # ordinal words
    ("April twenty-first, 2024", ["2024-04-21"], "", True),
    ("Q3 2024", ["Q3 2024"], "", True),
    ("third quarter of 2024", ["Q3 2024"], "", True),
    ("Q2 2024", ["Q3 2024"], "", False),
    ("2024-08-15", ["Q3 2024"], "", True),  # a day inside the quarter
    ("Q3 2024", ["2024-08-15"], "", False),  # coarser than the gold
    ("summer 2024", ["Q3 2024"], "", False),
    ("FY2023", ["FY2023"], "", True),
    ("fiscal 2023", ["FY2023"], "", True),
    ("FY23", ["FY2023"], "", True),
    ("2023", ["FY2023"], "", False),  # a fiscal year is not the calendar year
    ("FY2024", ["FY2023"], "", False),
    ("mid-2024", ["mid-2024"], "", True),
    ("early 2025", ["early 2025"], "", True),
    ("late 2025", ["early 2025"], "", False),
    ("early 2025", ["2025-02-10"], "", False),
    # ---- times of day ----
    ("The ferry leaves at 16:19.", ["16:19"], "", True),
    ("the ferry leaves at 4:19 pm", ["16:19"], "", True),
    ("the ferry leaves at 4:19 am", ["16:19"], "", False),
    ("16:20", ["16:19"], "", False),
    ("16:19 or 16:49", ["16:19"], "", False),
    ("It left at 16:19 and arrived at 18:02.", ["16:19"], "When did it leave?", False),  # a second time competes
    # ---- numbers: bounds, totals, ranges, words, formats ----
    ("more than 35%", ["35%"], "", False),
    ("35% or more", ["35%"], "", False),
    ("35%+", ["35%"], "", False),
    ("35% or so", ["35%"], "", True),
    ("at least 12", ["12"], "", False),
    ("over 12", ["12"], "", False),
    ("fewer than 12", ["12"], "", False),
    ("approximately 12", ["12"], "", True),
    ("between 30% and 40%", ["35%"], "", False),
    ("12 (of 40)", ["12"], "", True),  # a total is no second answer
    ("2 of the 12 lighthouses are closed.", ["2", "two"], "", True),
    ("12 of 13", ["13"], "", False),
    ("11 or 12", ["12"], "", False),
    ("12 to 13", ["12"], "", False),
    ("35% (up from 30% in 2022)", ["35%"], "What share in 2023?", True),
    # a bound the gold satisfies is context; one it breaks is another answer ("35%, or more than 40%")
    ("35%, or more than 40%", ["35%"], "", False),
    ("35% (more than 30%)", ["35%"], "", True),
    ("35% (less than 30%)", ["35%"], "", False),
    ("35%, at least 36%", ["35%"], "", False),
    ("2024-04-16, after 2024-04-20", ["2024-04-16"], "", False),
    ("2024-04-16, before 2024-04-20", ["2024-04-16"], "", True),
    ("2024-04-16, no later than 2024-04-10", ["2024-04-16"], "", False),
    ("2024-04-16 (after 2023)", ["2024-04-16"], "", True),
    ("2024-04-16 (before 2024)", ["2024-04-16"], "", False),
    ("12 of 10", ["12"], "", False),
    ("12, between 13 and 15", ["12"], "", False),
    ("38.4 metres (over 120 feet)", GANNET, "", True),
    ("38.4 metres (over 130 feet)", GANNET, "", False),
    ("35% of revenue, 20% of costs", ["35%"], "", False),
    ("thirty-five percent", ["35%"], "", True),
    ("35 per cent", ["35%"], "", True),
    ("35 percentage points", ["35%"], "", True),
    ("0.35", ["35%"], "", False),  # a fraction is no percentage (decided: a score or a share must say which)
    ("35", ["35%"], "", False),
    ("3.5%", ["35%"], "", False),
    ("one million", ["1,000,000"], "", True),
    ("a million", ["1,000,000"], "", True),
    ("1e6", ["1,000,000"], "", True),
    ("10^6", ["1,000,000"], "", True),
    ("1 000 000", ["1,000,000"], "", False),  # a plain space is no digit separator (decided: "768 512 256" is a list)
    ("twenty-one", ["21"], "", True),
    ("thirty", ["30"], "", True),
    ("It has one author.", ["1"], "", True),  # "one" counts before a noun or alone
    ("One.", ["1"], "", True),
    ("one of the authors is Scott Martens", ["2"], "", False),
    ("the large one has 1.3B", ["1.3B"], "", True),  # "one" as a pronoun is no number
    ("zero", ["0"], "", True),
    ("768 or 2048", ["768"], "", False),  # a year-like count listed with the gold competes (jq019)
    ("- 768\n- 2048", ["768"], "", False),
    ("768\n2048", ["768"], "", False),
    ("2048 or 256", ["2048"], "", False),
    ("2,048 dimensions", ["2048"], "", True),
    ("jina-clip-v2 (2024) outputs 1024 dimensions.", ["1024"], "", True),  # a year in brackets is a year
    ("It outputs 768 dimensions and was released in 2024.", ["768"], "", True),
    ("8,100 tokens", ["8K"], "", False),  # "8K" stands for exactly 8,000 or 8,192
    ("8,193", ["8K"], "", False),
    ("8.2K tokens", ["8K"], "", True),  # 8,192 to the hundred
    ("8.192K", ["8K"], "", True),
    ("8K or 16K", ["8K"], "", False),
    ("1K or 512", ["1K"], "", False),  # "1K" is exactly 1,000 or 1,024: 512 does not round to it (jq274)
    ("- 1K\n- 512", ["1K"], "", False),
    ("8K (8,192 tokens)", ["8K"], "", True),
    ("8K (16K for the large)", ["8K"], "", False),
    ("3.1", ["3.10"], "", False),  # a bare gold written "3.10" is not "3.1" (a version)
    ("3.10", ["3.1"], "", True),
    ("570M", ["570M"], "", True),
    ("0.57 billion", ["570M"], "", True),
    ("572M", ["570M"], "", False),
    ("about 600M", ["570M"], "", False),
    # ---- money ----
    ("$1,200,000", ["$1.2 million"], "", True),
    ("USD 1.2 million", ["$1.2 million"], "", True),
    ("1.2 million dollars", ["$1.2 million"], "", True),
    ("US$1.2 million", ["$1.2 million"], "", True),
    ("$1.2m", ["$1.2 million"], "", True),  # after a currency "m" is million, not metres
    ("$1.2 billion", ["$1.2 million"], "", False),
    ("€1.2 million", ["$1.2 million"], "", False),
    ("1.2 million", ["$1.2 million"], "", False),  # no currency: not the amount
    ("€1,2 Mio.", ["€1.2 million"], "", True),  # a decimal comma where it says money (decided)
    ("EUR 1.2m", ["€1.2 million"], "", True),
    ("1.2 million euros", ["€1.2 million"], "", True),
    # ---- measures: conversions assert at the gold's precision, other units and dimensions do not ----
    ("120 m²", ["120 m²"], "", True),
    ("120 m2", ["120 m²"], "", True),
    ("120 square metres", ["120 m²"], "", True),
    ("120 sq m", ["120 m²"], "", True),
    ("1,292 sq ft", ["120 m²"], "", True),
    ("120 sq ft", ["120 m²"], "", False),
    ("120 m", ["120 m²"], "", False),
    ("120 m³", ["120 m²"], "", False),
    ("120 km²", ["120 m²"], "", False),
    ("12 °C", ["12 °C"], "", True),
    ("12 degrees Celsius", ["12 °C"], "", True),
    ("53.6 °F", ["12 °C"], "", True),
    ("12 °F", ["12 °C"], "", False),
    ("12 C", ["12 °C"], "", False),
    ("12 degrees", ["12 °C"], "", False),
    ("-12 °C", ["12 °C"], "", False),
    ("minus 12 °C", ["-12 °C"], "", True),
    ("100 °C (212 °F)", ["100 °C"], "", True),
    ("100 °C (200 °F)", ["100 °C"], "", False),
    ("126 feet", ["38.4 metres"], "", True),  # the same height to the same number of digits
    ("125 feet", ["38.4 metres"], "", False),
    ("3840 cm", ["38.4 metres"], "", True),
    ("0.0384 km", ["38.4 metres"], "", True),
    ("3.84 km", ["38.4 metres"], "", False),
    ("38 metres", ["38.4 metres"], "", False),
    ("180 minutes", ["3 h"], "", True),
    ("3 hours 20 minutes", ["3 h"], "", False),
    ("3 days", ["3 h"], "", False),
    ("9.580 s", ["9.58 seconds"], "", True),
    ("9.6 s", ["9.58 seconds"], "", False),
    ("9.58", ["9.58 seconds"], "", False),  # a bare number for a gold with a unit (a bare alias would allow it)
    ("2000 MB", ["2 GB"], "", True),
    ("220 lb", ["100 kg"], "", True),
    ("100 lb", ["100 kg"], "", False),
    ("1 tonne", ["1000 kg"], "", True),
    ("1 ton", ["1000 kg"], "", False),  # a ton is short, long or metric: no unit
    ("88.5 km/h", ["55 mph"], "", True),
    ("55 km/h", ["55 mph"], "", False),
    ("1500 ml", ["1.5 litres"], "", True),
    ("1.5 kg", ["1.5 litres"], "", False),
    ("4000 W", ["4 kW"], "", True),
    ("4 MW", ["4 kW"], "", False),
    ("78.9 g/mol", ["78.9 g/mol"], "", True),
    ("78.9 g", ["78.9 g/mol"], "", False),
    ("12 km", ["12 lighthouses"], "", False),  # the gold counts things; a measure is something else
    ("12 towers", ["12 lighthouses"], "", True),
    ("6.02e23", ["6.02 × 10^23"], "", True),
    # ---- names, places, organisations ----
    ("Henry VIII", ["Henry VIII"], "", True),
    ("Henry VII", ["Henry VIII"], "", False),
    ("Henry VIII and Henry VII", ["Henry VIII"], "", False),  # a regnal number is a name's, not an acronym
    ("Henry VIII or Edward VI", ["Henry VIII"], "", False),
    ("Henry VIII, not Henry VII", ["Henry VIII"], "", True),
    ("Martin Luther King", ["Martin Luther King Jr."], "", True),  # "Jr." may be left out
    ("Martin Luther King Sr.", ["Martin Luther King Jr."], "", False),
    ("Jean Paul Sartre", ["Jean-Paul Sartre"], "", True),
    ("Paul Sartre", ["Jean-Paul Sartre"], "", False),
    ("Søren Kierkegaard", ["Soren Kierkegaard"], "", True),
    ("Soren Kierkegaard", ["Søren Kierkegaard"], "", True),
    ("Łukasz Kaiser", ["Lukasz Kaiser"], "", True),
    ("Michael Guenther", ["Michael Günther"], "", True),
    ("Nguyễn Văn An", ["Nguyen Van An"], "", True),
    ("Prof. Jane Goodall", ["Jane Goodall"], "", True),
    ("Jane Goodall, PhD", ["Jane Goodall"], "", True),
    ("Ludwig van Beethoven and Wolfgang Amadeus Mozart", ["Ludwig van Beethoven"], "", False),
    ("Beethoven", ["Ludwig van Beethoven"], "", False),
    ("Scott Martens and Han Xiao", ["Scott Martens and Han Xiao"], "", True),  # a gold that is a list of two names
    ("Han Xiao and Scott Martens", ["Scott Martens and Han Xiao"], "", True),
    ("- Scott Martens\n- Han Xiao", ["Scott Martens and Han Xiao"], "", True),
    ("Scott Martens", ["Scott Martens and Han Xiao"], "", False),
    ("Scott Martens and Bo Wang", ["Scott Martens and Han Xiao"], "", False),
    ("Scott Martens, Han Xiao and Bo Wang", ["Scott Martens and Han Xiao"], "", False),
    ("Scott Martens but not Han Xiao", ["Scott Martens and Han Xiao"], "", False),
    ("Jina AI GmbH", ["Jina AI"], "", True),
    ("Jina AI and Elastic", ["Jina AI"], "", False),
    ("Jina AI, now part of Elastic", ["Jina AI"], "", True),
    ("Berlin, Germany", ["Berlin"], "", True),
    ("Berlin or Munich", ["Berlin"], "", False),
    ("Berlin and Munich", ["Berlin"], "", False),
    ("In Berlin, not Munich", ["Berlin"], "", True),
    ("Stanford University and MIT", ["Stanford"], "", False),
    ("Washington, D.C.", ["Washington, D.C."], "", True),
    ("Washington DC", ["Washington, D.C."], "", True),
    # ---- short phrases, versions, yes/no ----
    ("It is built of granite.", ["granite"], "", True),
    ("granite and sandstone", ["granite"], "", False),
    ("granite, then painted white", ["granite"], "", True),
    ("sandstone, not granite", ["granite"], "", False),
    ("1.2.3 or 1.2.4", ["1.2.3"], "", False),
    ("v1.2.3", ["1.2.3"], "", True),
    ("jina-embeddings-v3", ["v3"], "", True),  # decided: an id that ends in the gold version states it
    ("jina-embeddings-v2 and v3", ["v3"], "", False),
    ("Yes, it is.", ["yes"], "", True),
    ("Yes, it was released under Apache 2.0.", ["yes"], "", True),
    ("Yes, no other license applies.", ["yes"], "", True),
    ("Yes and no.", ["yes"], "", False),
    ("Yes (or no)", ["yes"], "", False),
    ("Yes\n\nNo", ["yes"], "", False),
    ("Yes. Actually, no.", ["yes"], "", False),
    ("Yes. Just kidding, no.", ["yes"], "", False),
    ("Yes, maybe.", ["yes"], "", False),
    ("Maybe yes.", ["yes"], "", False),
    ("No", ["yes"], "", False),
    ("Not really, no.", ["no"], "", True),
    ("No, it is not.", ["no"], "", True),
    ("Nope.", ["no"], "", True),
    ("No. Wait, yes.", ["no"], "", False),
    ("I don't know", ["no"], "", False),
]
# Left as they are, on purpose (README, grading): each would need a reader, not a grader of strings.
KNOWN_LIMITS = [
    ("Martens, Scott", S, "", True),  # surname first with a comma: two one-word names to the name finder
    ("first lit in 1856, rebuilt in 1902", ["1856"], "When was it first lit?", True),  # another event's year competes
    ("It was published in April 2024, on the 16th.", ["2024-04-16"], "", True),  # a date split across a clause
    ("20240416", ["2024-04-16"], "", True),  # basic ISO 8601: an 8-digit number to the grader
    ("Henry the Eighth", ["Henry VIII"], "", True),  # ordinal words in names: the question file's aliases
    ("the UK", ["United Kingdom"], "", True),  # acronyms and their expansions: aliases
    ("none", ["0"], "", True),  # "none"/"no X" for zero: a negation to the grader
    ("It is not.", ["no"], "", True),  # a yes/no answer without the word
    ("3h20", ["3 h 20 min"], "", True),  # compound durations
    ("285.15 K", ["12 °C"], "", True),  # kelvin: "K" is a thousand
    ("Berlin, Munich", ["Berlin"], "", False),  # two one-word places with a comma read as an apposition ("Berlin, Germany")
]


@pytest.mark.parametrize("answer,golds,question,expected", CASES)
def test_correct_table(answer, golds, question, expected):
    q = Question("q", question, golds[0], golds[1:])
    got = grade_text(answer, q)["correct"]
    assert got == float(expected), verdict(answer, golds, question).as_dict()


@pytest.mark.parametrize("answer,golds,question,expected", KNOWN_LIMITS)
def test_known_limits(answer, golds, question, expected):
    """What correct gets wrong, kept visible: each row fails today (strict xfail turns a fix into a test to move)."""
    q = Question("q", question, golds[0], golds[1:])
    if grade_text(answer, q)["correct"] != float(expected):
        pytest.xfail("a known limit of a string grader (README, grading)")
    raise AssertionError(f"fixed: move {answer!r} into CASES")


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
    assert v.offered == ["Scott Martens"] and "only offered, denied" in v.reason
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

    builtin = Path(__file__).resolve().parents[2] / "searchbox" / "builtin"
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


def test_packaged_questions_restated_pass_and_shotguns_fail():
    """Each packaged question: an answer that restates its title or model passes; the gold beside another question's gold of
    the same template (a shotgun, a bulleted pair, a correction the wrong way) fails. Found by the issue 19 review: titles
    with "Not", "No." and "?" in them made correct deny or question the gold (jq010, jq085, jq179 and nine more), and "768 or
    2048", "1K or 512", "Han Xiao / Engineering Group" passed."""
    import json
    import re
    from collections import defaultdict
    from pathlib import Path

    packaged = Path(__file__).resolve().parents[2] / "searchbox" / "builtin" / "jina-questions.jsonl"
    rows = [json.loads(ln) for ln in packaged.read_text().splitlines()]
    kind = lambda r: r["template"].split("_", 1)[-1]  # card_license and successor_license share the kind of their gold
    by_kind = defaultdict(list)
    for r in rows:
        by_kind[kind(r)].append(r["answer"])
    failures = []
    for r in rows:
        q = Question(r["id"], r["question"], r["answer"], r.get("aliases", []))
        title = re.search(r'"(.*)"', r["question"])
        subject = f'The article "{title[1]}"' if title else "The model"
        for answer in (f"{subject}: {r['answer']}.", f"**{r['answer']}**\n\n{subject} says so."):
            if grade_text(answer, q)["correct"] != 1.0:
                failures.append((r["id"], answer))
        other = next((a for a in sorted(set(by_kind[kind(r)])) if not any(contains(a, [g]) for g in q.golds)
                      and not contains(r["answer"], [a])), None)
        if other is None:
            continue
        for answer in (f"{r['answer']} or {other}", f"- {r['answer']}\n- {other}", f"{other}, not {r['answer']}"):
            if grade_text(answer, q)["correct"] != 0.0:
                failures.append((r["id"], answer))
    assert not failures, failures[:20]
