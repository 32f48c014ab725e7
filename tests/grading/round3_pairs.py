"""Held-out style pairs of issue 29 (round three), verdicts fixed by hand before grading: (question, gold, aliases, answer, correct).

Data, read by tests/grading/test_round3.py and benchmarks/grader_round3.py (before/after accuracy)."""

CMP_H = "Which is higher, Wellington Tower or Gannet Rock?"
CMP_B = "Who was born first, Phil Spector or Brian Wilson?"
BRIDGE = "Who wrote the song that the band behind 'To Know Him Is to Love Him' recorded first?"

PAIRS: list[tuple[str, str, str, list[str], str, float]] = [
    # (class, question, gold, aliases, answer, correct)
    ("comparison", CMP_H, "Gannet Rock", [], "Wellington Tower is higher than Gannet Rock.", 0.0),
    ("comparison", CMP_H, "Gannet Rock", [], "Gannet Rock is higher than Wellington Tower.", 1.0),
    ("comparison", CMP_H, "Gannet Rock", [], "Gannet Rock and Wellington Tower are both tall.", 0.0),
    ("comparison", CMP_H, "Gannet Rock", [], "Gannet Rock.", 1.0),
    ("comparison", CMP_H, "Gannet Rock", [], "Wellington Tower, which is taller than Gannet Rock.", 0.0),
    ("comparison", CMP_B, "Phil Spector", [], "Brian Wilson was born before Phil Spector.", 0.0),
    ("comparison", CMP_B, "Phil Spector", [], "Phil Spector was born first, before Brian Wilson.", 1.0),
    ("comparison", CMP_B, "Phil Spector", [], "Phil Spector, not Brian Wilson.", 1.0),
    ("comparison", CMP_B, "Phil Spector", [], "Brian Wilson, born after Phil Spector? No: Brian Wilson was born first.", 0.0),
    ("list", "Who wrote the song?", "Phil Spector", [], "Phil Spector, Brian Wilson, Jack Nitzsche", 0.0),
    ("list", "Who founded the lab?", "Ada Lovelace", [], "Charles Babbage, Ada Lovelace, Mary Somerville.", 0.0),
    ("list", "Who founded the lab?", "Ada Lovelace", [], "Ada Lovelace founded it.", 1.0),
    ("whole-name", "In which city was the station built?", "York", [], "New York", 0.0),
    ("whole-name", "In which city was the station built?", "York", [], "North York", 0.0),
    ("whole-name", "In which city was the station built?", "York", [], "It was built in York, England.", 1.0),
    ("whole-name", "In which city was the station built?", "York", [], "York", 1.0),
    ("number", "How many degrees of freedom does the arm have?", "28 degrees of freedom", [], "28 joints but 32 degrees of freedom", 0.0),
    ("number", "How many degrees of freedom does the arm have?", "28 degrees of freedom", [], "It has 28 degrees of freedom.", 1.0),
    ("currency", "What was the salary?", "74,000 US dollars", [], "$74,000", 1.0),
    ("currency", "What was the salary?", "74,000 US dollars", [], "74,000 dollars", 1.0),
    ("currency", "What was the salary?", "74,000 US dollars", [], "USD 74,000", 1.0),
    ("currency", "What was the salary?", "74,000 US dollars", [], "The salary was 74,000 U.S. dollars.", 1.0),
    ("currency", "What was the salary?", "74,000 US dollars", [], "$47,000", 0.0),
    ("currency", "What was the salary?", "74,000 US dollars", [], "74,000 euros", 0.0),
    ("currency", "What did it cost?", "12 Swiss francs", [], "CHF 12", 1.0),
    ("explanation", BRIDGE, "Phil Spector", [], "Phil Spector wrote it; the Teddy Bears recorded it first.", 1.0),
    ("explanation", "Which company developed the model that Acme Search uses?", "Jina AI", [],
     "Jina AI developed it; Acme Search uses jina-embeddings-v3.", 1.0),
    ("explanation", "Which lighthouse keeper served on the rock that Skerrow Point faces?", "Dana Whitfield", [],
     "Dana Whitfield kept the light on Gannet Rock, across from Skerrow Point.", 1.0),
]
