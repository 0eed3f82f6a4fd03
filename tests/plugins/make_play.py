"""A small play for the character-level tests: three speakers, each with a habit of speech."""

import random

LINES = {
    "ALICE": ["the cat sat on the mat", "a cat is on a mat", "the mat holds the cat"],
    "BOB": ["we go to sea at dawn", "the sea is grey at dawn", "go now to the sea"],
    "CAROL": ["sing a song of six", "six songs i sing", "a song for the six of us"],
}


def write_play(path, lines_per_speaker: int = 40, seed: int = 0) -> None:
    gen = random.Random(seed)
    out = []
    for _ in range(lines_per_speaker):
        for speaker, lines in LINES.items():
            out.append(f"{speaker}: {gen.choice(lines)}.")
    path.write_text("\n".join(out) + "\n")
