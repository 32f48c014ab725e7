"""Round four: crafted answers a reviewer would try, each through the real grader, verdict fixed by hand first.

Each group names the defect it found (the grade was wrong before its commit); the rows beside the defect are variants that
were already right and must stay so.
"""

from __future__ import annotations

import pytest

from searchbox.grading import Question, grade_text, verdict

S, H = ["Scott Martens"], ["Han Xiao"]
APACHE = ["Apache-2.0"]
GANNET = ["38.4 metres", "38.4 m", "38.4"]

# (ANSWER.md, golds, question, correct?)
UNICODE = [
    # invisible format characters (zero-width space, joiner, BOM, bidi controls) hid a negation from the grader
    ("N\u200bot Han Xiao", H, "", False),
    ("n\u200dot Han Xiao", H, "", False),
    ("Han Xiao is n\u2060ot the author", H, "", False),
    ("Han Xiao is no\ufefft the author", H, "", False),
    ("Sc\u200bott Martens", S, "", True),
    ("A\u200bpache-2.0", APACHE, "", True),
    # Cyrillic and Greek look-alikes spelled a negation the grader could not read, or a name it could not match
    ("Han Xiao is n\u043et the author", H, "", False),  # Cyrillic o
    ("N\u043et Han Xiao", H, "", False),
    ("\u039d\u039f, it is Scott Martens.", H, "", False),  # Greek capital Nu Omicron: "NO"
    ("\u0405cott Martens", S, "", True),  # Cyrillic S
    ("Scott M\u0430rtens", S, "", True),  # Cyrillic a
    ("Not Han Xiao", H, "", False),
    ("Scott Martens", S, "", True),
    ("Москва", ["Москва"], "", True),  # a Cyrillic word is left as it is
    ("Han Xiao\u00a0", H, "", True),
]


def _grade(answer: str, golds: list[str], question: str) -> float:
    return grade_text(answer, Question("q", question, golds[0], golds[1:]))["correct"]


@pytest.mark.parametrize("answer,golds,question,expected", UNICODE)
def test_invisible_and_look_alike_characters_read_as_they_look(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

CMP_H = "Which is higher, Wellington Tower or Gannet Rock?"
CMP_B = "Who was born first, Phil Spector or Brian Wilson?"
CMP_M = "Which has more parameters, jina-embeddings-v3 or jina-clip-v2?"
GR, PS = ["Gannet Rock"], ["Phil Spector"]
COMPARISONS = [
    # the answer's comparative points the other way: the gold named first is the loser
    ("Gannet Rock is lower than Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock is shorter than Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock is smaller than Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock is less high than Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock, which is lower than Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock is not higher than Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock isn't as tall as Wellington Tower.", GR, CMP_H, False),
    ("Gannet Rock is the lower of the two.", GR, CMP_H, False),
    ("Gannet Rock is outranked by Wellington Tower.", GR, CMP_H, False),
    ("Phil Spector was born after Brian Wilson.", PS, CMP_B, False),
    ("Phil Spector is younger than Brian Wilson.", PS, CMP_B, False),
    ("Phil Spector was born later than Brian Wilson.", PS, CMP_B, False),
    ("Phil Spector was preceded by Brian Wilson.", PS, CMP_B, False),
    ("jina-embeddings-v3 has fewer parameters than jina-clip-v2.", ["jina-embeddings-v3"], CMP_M, False),
    # ... and the other option named first as the loser chooses the gold
    ("Wellington Tower is lower than Gannet Rock.", GR, CMP_H, True),
    ("Wellington Tower is shorter than Gannet Rock.", GR, CMP_H, True),
    ("Wellington Tower is lower; Gannet Rock is higher.", GR, CMP_H, True),
    ("Wellington Tower is outranked by Gannet Rock.", GR, CMP_H, True),
    ("Brian Wilson was born after Phil Spector.", PS, CMP_B, True),
    ("Brian Wilson is younger than Phil Spector.", PS, CMP_B, True),
    ("jina-clip-v2 has fewer parameters than jina-embeddings-v3.", ["jina-embeddings-v3"], CMP_M, True),
    # already right, kept
    ("Gannet Rock is higher than Wellington Tower.", GR, CMP_H, True),
    ("Gannet Rock is taller than Wellington Tower by 3 m.", GR, CMP_H, True),
    ("Both are about 40 m, but Gannet Rock is higher.", GR, CMP_H, True),
    ("Wellington Tower is higher than Gannet Rock.", GR, CMP_H, False),
    ("Wellington Tower, which is taller than Gannet Rock.", GR, CMP_H, False),
    ("Gannet Rock and Wellington Tower are both tall.", GR, CMP_H, False),
    ("Gannet Rock (38.4 m) vs Wellington Tower (41 m).", GR, CMP_H, False),
    ("Phil Spector was born first, before Brian Wilson.", PS, CMP_B, True),
    ("Phil Spector is older than Brian Wilson.", PS, CMP_B, True),
    ("Brian Wilson was born before Phil Spector.", PS, CMP_B, False),
    ("Phil Spector, not Brian Wilson.", PS, CMP_B, True),
    ("Gannet Rock.", GR, CMP_H, True),
    ("Wellington Tower is more famous, but Gannet Rock is higher.", GR, CMP_H, True),  # "more famous" is on no scale asked
    ("Gannet Rock is more famous, but Wellington Tower is higher.", GR, CMP_H, False),
    ("Phil Spector, not Brian Wilson, was born first.", PS, CMP_B, True),  # a denied option is no subject
    ("Brian Wilson, not Phil Spector, was born first.", PS, CMP_B, False),
    ("Gannet Rock, followed by Wellington Tower.", GR, "Which was built first, Wellington Tower or Gannet Rock?", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", COMPARISONS)
def test_a_comparison_is_read_in_its_direction(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

WORDING = [
    # negations the grader did not know: adverbs of error, "untrue", "ruled out", "by no means", "anyone but"
    ("Han Xiao is mistakenly credited; Scott Martens wrote it.", H, "", False),
    ("Han Xiao is mistakenly credited; Scott Martens wrote it.", S, "", True),
    ("It was wrongly attributed to Han Xiao.", H, "", False),
    ("Han Xiao is falsely listed as the author.", H, "", False),
    ("Han Xiao was erroneously named.", H, "", False),
    ("It is untrue that Han Xiao wrote it.", H, "", False),
    ("Han Xiao was ruled out.", H, "", False),
    ("Han Xiao was excluded.", H, "", False),
    ("Han Xiao has been eliminated as the author.", H, "", False),
    ("The claim that Han Xiao wrote it was debunked.", H, "", False),
    ("I excluded Han Xiao; it is Scott Martens.", S, "", True),
    ("Han Xiao is by no means the author.", H, "", False),
    ("Anyone but Han Xiao.", H, "", False),
    ("Anything but Apache-2.0.", APACHE, "", False),
    ("It is true that Scott Martens wrote it.", S, "", True),
    ("Nothing but Apache-2.0.", APACHE, "", True),
    # hedges it did not know: possibility, embedded questions ("whether"), attribution to others, abstention
    ("Han Xiao is a possibility.", H, "", False),
    ("Han Xiao is one possibility.", H, "", False),
    ("It is possible that Han Xiao wrote it.", H, "", False),
    ("You asked whether Han Xiao wrote it; I don't know.", H, "Who wrote it?", False),
    ("It's unknown whether Han Xiao wrote it.", H, "", False),
    ("Han Xiao; I don't know.", H, "", False),
    ("Han Xiao was rumoured to be the author.", H, "", False),
    ("Han Xiao is said to be the author.", H, "", False),
    ("Han Xiao is reportedly the author.", H, "", False),
    ("Some say Han Xiao; the post says Scott Martens.", H, "", False),
    ("Scott Martens; it is possible he had help.", S, "", True),
    # "possible" as a plain adjective hedges nothing (the first form of the rule read it as a hedge)
    ("Han Xiao is the best possible answer.", H, "", True),
    ("Apache-2.0, the most permissive license possible here.", APACHE, "", True),
    ("Scott Martens (answered as soon as possible).", S, "", True),
    ("Han Xiao is possible.", H, "", False),
    ("One possible author is Han Xiao.", H, "", False),
    ("Possible authors: Han Xiao.", H, "", False),
    ("Whether or not you count the editor, Scott Martens wrote it.", S, "", True),
    ("Scott Martens. I don't know who edited it.", S, "", True),
    ("I know that Scott Martens wrote it.", S, "", True),
    ("Scott Martens, I believe.", S, "", True),
    # a clause that takes back what came before, worded otherwise
    ("Han Xiao. That's not correct.", H, "", False),
    ("Han Xiao. That is not right.", H, "", False),
    ("Han Xiao. I retract that.", H, "", False),
    ("Han Xiao (ignore that).", H, "", False),
    ("38.4 m - that's a common misconception.", GANNET, "", False),
    ("Han Xiao. Update: it's Scott Martens.", H, "", False),
    ("Han Xiao. Update: it's Scott Martens.", S, "", True),
    ("Han Xiao. Edit: Scott Martens.", H, "", False),
    ("Han Xiao. On reflection, Scott Martens.", H, "", False),
    ("Han Xiao. I was wrong above: Scott Martens.", H, "", False),
    ("Scott Martens. That's correct.", S, "", True),
    ("Scott Martens. That is right.", S, "", True),
    ("Update the index first: Scott Martens wrote it.", S, "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", WORDING)
def test_negations_hedges_and_retractions_worded_otherwise(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

LATER_LINES = [
    # a correction on a line after the answer line took nothing back: the grader read the first line alone
    ("Final answer: Han Xiao\n\nWait, re-reading, the answer is Scott Martens.", H, "", False),
    ("Final answer: Han Xiao\n\nWait, re-reading, the answer is Scott Martens.", S, "", True),
    ("Han Xiao\n\nCorrection: Scott Martens.", H, "", False),
    ("Han Xiao\n\nCorrection: Scott Martens.", S, "", True),
    ("Han Xiao\n\nActually, it's Scott Martens.", H, "", False),
    ("Han Xiao\n\nNo - it's Scott Martens.", H, "", False),
    ("**Han Xiao**\n\n*Update:* Scott Martens wrote it.", H, "", False),
    ("Han Xiao\n\nI was wrong above: Scott Martens.", H, "", False),
    ("Han Xiao\n\nThat's not correct.", H, "", False),
    ("Han Xiao\n\nScratch that.", H, "", False),
    ("38.4 m\n\nCorrection: 41 m.", GANNET, "", False),
    ("2024-04-16\n\nActually, 2024-04-18.", ["2024-04-16"], "", False),
    # ... while a later line that only says more stays context
    ("Scott Martens\n\nActually, he also wrote the follow-up.", S, "", True),
    ("Scott Martens\n\nCorrection: the post was published in 2024.", S, "", True),
    ("Scott Martens\n\nWait, I should double-check the byline: yes, Scott Martens.", S, "", True),
    ("Scott Martens\n\nNo other author is credited.", S, "", True),
    ("Scott Martens\n\nNote: not Han Xiao, who only edited it.", S, "", True),
    ("Scott Martens\n\nHe also co-wrote two posts with Han Xiao.", S, "", True),
    # a later line whose label hedges offers what it lists ("Alternatives: 41 m")
    ("38.4 m\n\nAlternatives: 41 m", GANNET, "", False),
    ("Answer: 38.4 m\nConfidence: 40%\nAlternatives: 41 m", GANNET, "", False),
    ("Scott Martens\n\nOther possible authors: Han Xiao, Bo Wang", S, "", False),
    ("Scott Martens\n\n**Possibly also:** Han Xiao", S, "", False),
    ("35%\n\nConfidence: 90%", ["35%"], "", True),
    ("Scott Martens\n\nEditor: Han Xiao", S, "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", LATER_LINES)
def test_later_lines_that_take_back_or_offer_alternatives(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

BOUNDS = [
    # a comparative adjective makes a bound, as "more than" does
    ("taller than 38.4 m", GANNET, "", False),
    ("It is taller than 38.4 metres.", GANNET, "", False),
    ("shorter than 38.4 m", GANNET, "", False),
    ("38.4 m or taller", GANNET, "", False),
    ("38.4 m or longer", GANNET, "", False),
    ("older than 12 years", ["12 years"], "", False),
    ("12 years or older", ["12 years"], "", False),
    ("38.4 m (taller than 30 m)", GANNET, "", True),  # a bound the gold satisfies is context
    ("38.4 m (shorter than 30 m)", GANNET, "", False),
    ("38.4 m, or rather 41 m", GANNET, "", False),
    ("38.4 m or so", GANNET, "", True),
    ("Other than 41 m, it is 38.4 m.", GANNET, "", True),
    # "No." opening a sentence is an answer, not the label of a number ("No. 5")
    ("41 m? No. 38.4 m.", GANNET, "", True),
    ("38.4 m? No. 41 m.", GANNET, "", False),
    ("It is platform No. 5.", ["5"], "", False),
]


@pytest.mark.parametrize("answer,golds,question,expected", BOUNDS)
def test_comparative_bounds_and_a_no_that_opens_a_sentence(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

RGB, CITIES, PAIR = ["red, green, blue"], ["Paris, London, Berlin"], ["Scott Martens and Han Xiao"]
LISTS = [
    # a gold that is a list: every item, in any order, nothing else, and not as alternatives
    ("blue, green, red", RGB, "", True),
    ("red, green and blue", RGB, "", True),
    ("Red, Green, Blue", RGB, "", True),
    ("- blue\n- red\n- green", RGB, "", True),
    ("The colours are green, blue and red.", RGB, "", True),
    ("red, green, blue", RGB, "", True),
    ("red, green, blue, yellow", RGB, "", False),
    ("- blue\n- red\n- green\n- yellow", RGB, "", False),
    ("red, green", RGB, "", False),
    ("red, green or blue", RGB, "", False),
    ("not red, but green and blue", RGB, "", False),
    ("green and blue, not red", RGB, "", False),
    ("Paris, London and Berlin", CITIES, "", True),
    ("Berlin, Paris, London", CITIES, "", True),
    ("Paris, London, Berlin, Rome", CITIES, "", False),
    ("Paris and London", CITIES, "", False),
    ("Scott Martens or Han Xiao", PAIR, "", False),
    ("Either Scott Martens or Han Xiao", PAIR, "", False),
    ("Scott Martens and/or Han Xiao", PAIR, "", False),
    ("Han Xiao and Scott Martens", PAIR, "", True),
    ("Scott Martens", PAIR, "", False),
    ("768 or 1024", ["768 and 1024"], "", False),
    ("1024 and 768", ["768 and 1024"], "", True),
    ("Jina AI", ["Jina AI, Elastic and Weaviate"], "", False),  # a typed part of a list is not the list
    ("Jina AI, Elastic and Weaviate", ["Jina AI, Elastic and Weaviate"], "", True),
    ("Weaviate, Jina AI and Elastic", ["Jina AI, Elastic and Weaviate"], "", True),
    # not lists: one comma is an apposition, a comma in a number groups digits
    ("Washington, D.C.", ["Washington, D.C."], "", True),
    ("41,200 visitors", ["41,200"], "", True),
    ("Little Vell, first lit in 1856.", ["Little Vell, 1856", "Little Vell"], "", True),
    ("2024-04-16", ["Tuesday, April 16, 2024"], "", True),  # commas inside one value split nothing
    ("2005", ["two thousand and five"], "", True),
    ("Pride and Prejudice", ["Pride and Prejudice"], "", True),
    ("Pride and Prejudice and Zombies", ["Pride and Prejudice"], "", False),
]


@pytest.mark.parametrize("answer,golds,question,expected", LISTS)
def test_a_list_gold_wants_every_item_and_no_other(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

FORMATS = [
    # a currency symbol after the amount, as much of Europe writes it
    ("5 €", ["€5"], "", True),
    ("5,00 €", ["€5"], "", True),
    ("5€", ["€5"], "", True),
    ("1,2 Mio. €", ["€1.2 million"], "", True),
    ("5 €", ["$5"], "", False),
    ("5 € or 6 €", ["€5"], "", False),
    # a "$" amount followed by the code of its dollar
    ("$5 AUD", ["$5"], "", False),
    ("$5 AUD", ["A$5"], "", True),
    ("$5 CAD", ["5 Canadian dollars"], "", True),
    ("$5 USD", ["$5"], "", True),
    ("$5", ["$5"], "", True),
    # a decimal comma before a unit, as before "%" and money
    ("38,4 m", GANNET, "", True),
    ("38,4 metres", GANNET, "", True),
    ("12,5 kg", ["12.5 kg"], "", True),
    ("38,4 km", GANNET, "", False),
    ("1,200 m", ["1200 m"], "", True),  # three digits after the comma group thousands
    ("3,5 %", ["3.5%"], "", True),
    # an apostrophe groups thousands (Swiss style), as the normaliser already read it
    ("1'234'567", ["1234567"], "", True),
    ("1\u2019234\u2019567 visitors", ["1,234,567"], "", True),
    ("1'234'568", ["1234567"], "", False),
]


@pytest.mark.parametrize("answer,golds,question,expected", FORMATS)
def test_number_and_currency_formats(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

MEASURES = [
    # a number that counts things ("yards", "storeys", "points") is no bare alias of a measure ("38.4" for "38.4 metres")
    ("38.4 yards", GANNET, "", False),
    ("38.4 yd", GANNET, "", False),
    ("38.4 storeys", GANNET, "", False),
    ("38.4 points", GANNET, "", False),
    ("42.0 yards", GANNET, "", True),  # yards are a length: 38.4 m to as many digits
    ("42 yards", GANNET, "", False),
    ("It is 38.4 tall.", GANNET, "", True),  # an adjective counts nothing
    ("38.4 according to the card", GANNET, "", True),
    ("38.4", GANNET, "", True),
    ("12 towers", ["12 lighthouses"], "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", MEASURES)
def test_a_count_of_things_is_no_measure(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

DATES = [
    # day-month-year with dashes, as with slashes and dots
    ("16-04-2024", ["2024-04-16"], "", True),
    ("16-Apr-2024", ["2024-04-16"], "", True),
    ("16-04-2025", ["2024-04-16"], "", False),
    ("04-05-2024", ["2024-04-05"], "", False),  # either reading is a date: left as numbers, as with slashes
    ("2024-04-16", ["16-04-2024"], "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", DATES)
def test_dates_written_with_dashes(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()

POLAR = [
    # yes/no said in a sentence, taken back with a hedge, or after "no doubt"
    ("The answer is no.", ["no"], "", True),
    ("It's a no.", ["no"], "", True),
    ("The answer is yes.", ["yes"], "", True),
    ("The answer is yes.", ["no"], "", False),
    ("No doubt, yes.", ["yes"], "", True),
    ("Yes, probably not.", ["yes"], "", False),
    ("yes (probably not)", ["yes"], "", False),
    ("No, although it might be yes.", ["no"], "", False),
    ("I'd say no, but it could be yes.", ["no"], "", False),
    ("Yes - no doubt.", ["yes"], "", True),
    ("Yes, probably.", ["yes"], "", True),
    ("Yes, no other license applies.", ["yes"], "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", POLAR)
def test_yes_or_no_said_in_a_sentence_or_taken_back(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()


@pytest.mark.parametrize("line,value", [
    # a confidence out of a scale was read as a percentage ("9/10" as 9%)
    ("Confidence: 9/10", 0.9),
    ("Confidence: 8 / 10", 0.8),
    ("Confidence level: 3/5", 0.6),
    ("Confidence: 7 out of 10", 0.7),
    ("Confidence: 90 out of 100", 0.9),
    ("Confidence: 12/10", None),  # more than the scale states none
    ("Confidence: 9/0", None),
    # already right, kept
    ("Confidence: 0.9", 0.9),
    ("Confidence: 90%", 0.9),
    ("**Confidence:** 85%", 0.85),
    ("Confidence: high", None),
])
def test_a_confidence_out_of_a_scale(line, value):
    from searchbox.grading.calibration import stated_confidence

    got = stated_confidence(f"Scott Martens\n\n{line}")
    assert got == pytest.approx(value) if value is not None else got is None


ALTERNATIVE_LINES = [
    # a later line that opens with "or" or a hedge offers what it names, as "X, or maybe Y" does on one line
    ("Scott Martens\n\n(or Han Xiao)", S, "", False),
    ("Scott Martens\n\nOr possibly Han Xiao.", S, "", False),
    ("Scott Martens\n\nAlternatively, Han Xiao.", S, "", False),
    ("Scott Martens\n\nMaybe Han Xiao.", S, "", False),
    ("38.4 m\n\n(or 41 m)", GANNET, "", False),
    ("38.4 m\n\nOr 41 m if you count the mast.", GANNET, "", False),
    ("Scott Martens\n\nOr, to give his full name, Scott Martens.", S, "", True),
    ("Scott Martens\n\nIt might have been edited by Han Xiao.", S, "", True),  # hedged prose about someone else stays context
    ("Scott Martens\n\nOriginally published on the Jina AI blog.", S, "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", ALTERNATIVE_LINES)
def test_a_later_line_that_opens_with_or_offers_an_alternative(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()


WRAPPERS = [
    # an answer wrapped in plain HTML elements (no attributes) is text, not a copied document
    ("<p>Han Xiao</p>", H, "", True),
    ("<div>Han Xiao</div>", H, "", True),
    ("<answer>Han Xiao</answer>", H, "", True),
    ("<p>Not Han Xiao</p>", H, "", False),
    ("<p>Han Xiao</p><p>Scott Martens</p>", H, "", False),
    ("<ul><li>Scott Martens</li><li>Han Xiao</li></ul>", S, "", False),
    ("<span>Scott</span> <span>Martens</span>", S, "", True),
    # markup with attributes or media is still a copied document
    ('<span class="kg-bookmark-publisher">Han Xiao</span>', H, "", False),
    ('<div class="author">Han Xiao</div>', H, "", False),
    ('<p><img src="x.png">Han Xiao</p>', H, "", False),
]


@pytest.mark.parametrize("answer,golds,question,expected", WRAPPERS)
def test_plain_html_wrappers_are_text(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()


B12 = ["$1.2 billion"]
SCALES_AND_YEARS = [
    # "bn", "mn" written apart from the number, and the Indian scale words, as "billion" is
    ("USD 1.2 bn", B12, "", True),
    ("$1.2 bn", B12, "", True),
    ("1.2 bn USD", B12, "", True),
    ("$1.2 mn", B12, "", False),
    ("120 crore rupees", ["₹1.2 billion"], "", True),
    ("12 lakh", ["1.2 million"], "", True),
    ("12 lakh", ["12 million"], "", False),
    # a number followed by its own year is about that year ("How much in 2023?")
    ("$1.2 billion in 2023 and $1.5 billion in 2024", B12, "How much did it raise in 2023?", True),
    ("$1.5 billion in 2024 and $1.2 billion in 2023", B12, "How much did it raise in 2023?", True),
    ("$1.2 billion (2023) and $1.5 billion (2024)", B12, "How much did it raise in 2023?", True),
    ("$1.2 billion in 2023 and $1.5 billion in 2024", B12, "How much did it raise?", False),
    ("$1.2 billion or $1.5 billion in 2023", B12, "How much did it raise in 2023?", False),
    ("$1.5 billion in 2023 and $1.2 billion in 2024", B12, "How much did it raise in 2023?", False),
]


@pytest.mark.parametrize("answer,golds,question,expected", SCALES_AND_YEARS)
def test_scale_words_and_a_number_beside_its_own_year(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()


def test_padding_hides_no_alternative():
    """The claim was cut at 2,000 characters: spaces or dots before "or Han Xiao" hid it. Nothing the graders read
    (answer.ANSWER_CAP) is cut from the claim now."""
    for pad in (" " * 2100, ". " * 1100, "\u00a0" * 2100):
        assert _grade(f"Scott Martens{pad} or Han Xiao", S, "") == 0.0
    assert _grade("Scott Martens" + " " * 2100 + "(he wrote it)", S, "") == 1.0


IDS = [
    # a license with an adjective glued on is another license ("Apache-2.0-compatible"), a version joined to a model id another
    # model ("jina-embeddings-v3 or v4")
    ("Apache-2.0-compatible", APACHE, "", False),
    ("Apache 2.0-ish", APACHE, "", False),
    ("an Apache-2.0-style license", APACHE, "", False),
    ("Apache-2.0-licensed", APACHE, "", True),
    ("GPL-3.0-only", ["GPL-3.0-only"], "", True),
    ("GPL-3.0-or-later", ["GPL-3.0-or-later"], "", True),
    ("jina-embeddings-v3 or v4", ["jina-embeddings-v3"], "", False),
    ("jina-embeddings-v3/v4", ["jina-embeddings-v3"], "", False),
    ("jina-embeddings-v3 and v4", ["jina-embeddings-v3"], "", False),
    ("jina-embeddings-v3 or 4", ["jina-embeddings-v3"], "", False),
    ("jina-embeddings-v3, not v4", ["jina-embeddings-v3"], "", True),
    ("jina-embeddings-v3 and Jina AI's API", ["jina-embeddings-v3"], "", True),
    ("jina-embeddings-v3 (v3 is the newest)", ["jina-embeddings-v3"], "", True),
]


@pytest.mark.parametrize("answer,golds,question,expected", IDS)
def test_licenses_and_model_ids_with_something_glued_or_joined(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()
