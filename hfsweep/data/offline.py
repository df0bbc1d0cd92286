"""PROXY data for the offline presets, made from CPython's own documentation.

Without the hub there is no MRPC, Yelp or wikitext data. These files stand in for them: real English
sentences from `pydoc_data.topics` (which every Python install carries), labelled by a real
property of where each sentence comes from, with the real datasets' column names so the
presets' column mapping is unchanged. They are proxies: their scores say that training works,
not how BERT does on MRPC or Yelp.

- `mrpc_proxy/` (sentence1, sentence2, label): is sentence2 a shortened restatement of
  sentence1 (label 1: sentence1 with every third word dropped, so like a paraphrase it keeps
  most words) or of another sentence of the same documentation topic (label 0: a hard negative
  on the same subject)? Half of each.
- `yelp_proxy/` (text, label): which of the five largest documentation topics the sentence comes
  from (0-4, imbalanced, as the topics are).
- `wikitext_proxy/` (`wiki.train.raw`, `wiki.valid.raw`, wikitext-2-raw's file names): the
  documentation topics as running text, split as the embedded default splits them (every tenth
  topic validates), for the gpt2_wikitext preset's local-files path.
- `conll_proxy/` (`train.txt`, `validation.txt` in CoNLL-2003's four-column layout, IOB2 tags):
  documentation sentences, tagged O, each with one or two made-up person, place, organisation or
  other (MISC) names inserted after a word that hints at the kind ("by", "in", "at", "the"); the
  names come from fixed lists, shared by both splits.
- `summary_proxy/` (`document`, `summary` jsonl, XSum's columns): a documentation sentence and its
  first six words; `translation_proxy/` (`{"translation": {"ro": ..., "en": ...}}` jsonl, WMT16's
  rows): the first eight words of a sentence ("en") and the same words in reverse order ("ro").
  Copying tasks: their scores say that generation and its metrics work, not how T5 summarizes.
- `chat_proxy/` (`train.jsonl`, `validation.jsonl` of TRL's conversational `messages`): the user
  gives the first half of a documentation sentence, the assistant answers with the rest; for the
  sft presets (`model.task=sft`), whose loss is on the answer only.
- `digits/` (`train.parquet`, `validation.parquet`): not a proxy but scikit-learn's 1,797 real
  handwritten digits (8x8 scans), as `datasets` stores images, for the vit_digits_offline preset.
- `squad_proxy/` (`train.json`, `validation.json` in SQuAD v1.1's nested layout): contexts of three
  documentation sentences with a made-up person and a made-up place inserted (as in conll_proxy),
  and two questions each: "Which person is named?" and "Which place is named?".

For the classification proxies, each topic's first four fifths of sentences train, the rest
validate, so no sentence is in both.
The output is the same on every machine with the same Python version (and scikit-learn's digits).

An offline preset names its folder as `data.proxy` (e.g. `data.proxy=mrpc_proxy`): with `data.path`
unset, the preflight writes it into `cache_dir` on first use (`proxy_folder`) and reads it from there.
To write them elsewhere:

    python -m hfsweep.datasets_offline DIR    # DIR/mrpc_proxy/, yelp_proxy/, wikitext_proxy/, conll_proxy/,
                                                summary_proxy/, translation_proxy/, squad_proxy/, chat_proxy/, digits/
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import sys

from hfsweep.data.cache import atomic_dir
from hfsweep.data.sources import write_pydoc_topics

SEED = 0
PROXIES = (
    "mrpc_proxy",
    "yelp_proxy",
    "wikitext_proxy",
    "conll_proxy",
    "summary_proxy",
    "translation_proxy",
    "squad_proxy",
    "chat_proxy",
)
DIGITS = "digits"
PIXEL_SCALE = 255 / 16  # scikit-learn's digits hold 0..16 per pixel
MIN_TOPIC_SENTENCES = 10  # topics with fewer take no part in the pairs (validation then has 2 or more)
PAIRS = {"train": 4000, "validation": 400}
NUM_CLASSES = 5


def sentences(text: str) -> list[str]:
    """Prose sentences of 6 to 60 words; indented code, examples and tables are skipped."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.startswith((" ", "\t")) or paragraph.lstrip().startswith((">>>", "*", "|")):
            continue
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(paragraph.split())):
            if 6 <= len(sentence.split()) <= 60:
                found.append(sentence)
    return found


def topic_sentences() -> dict[str, dict[str, list[str]]]:
    """split -> topic -> its sentences, in order; the last fifth of a topic validates. A sentence
    repeated in the documentation counts once, in its first topic."""
    from pydoc_data.topics import topics

    splits: dict = {"train": {}, "validation": {}}
    seen: set[str] = set()
    for name in sorted(topics):
        found = [s for s in dict.fromkeys(sentences(topics[name])) if s not in seen]
        seen.update(found)
        cut = len(found) - len(found) // 5
        splits["train"][name], splits["validation"][name] = found[:cut], found[cut:]
    return splits


def shortened(sentence: str) -> str:
    """The sentence with every third word dropped."""
    return " ".join(word for i, word in enumerate(sentence.split()) if i % 3 != 2)


def restatement_pairs(by_topic: dict[str, list[str]], count: int, rng: random.Random) -> list[dict]:
    """`count` pairs within one topic: half restate sentence1 (label 1), half another sentence (label 0)."""
    names = sorted(by_topic)
    rows = []
    for i in range(count):
        first, other = rng.sample(by_topic[rng.choice(names)], 2)
        rows.append({"sentence1": first, "sentence2": shortened(first if i % 2 else other), "label": i % 2})
    return rows


def largest_topic_sentences(splits: dict, rng: random.Random) -> dict[str, list[dict]]:
    """Sentences of the NUM_CLASSES largest topics, labelled by topic (largest first), shuffled."""
    sizes = {name: len(splits["train"][name]) + len(splits["validation"][name]) for name in splits["train"]}
    classes = sorted(sizes, key=lambda n: (-sizes[n], n))[:NUM_CLASSES]
    out = {}
    for split, by_topic in splits.items():
        rows = [{"text": s, "label": label} for label, name in enumerate(classes) for s in by_topic[name]]
        rng.shuffle(rows)
        out[split] = rows
    return out


ENTITIES = {
    "PER": (
        "by",
        [
            "Ada Lovelace",
            "Alan Turing",
            "Grace Hopper",
            "Guido van Rossum",
            "Barbara Liskov",
            "Edsger Dijkstra",
            "Donald Knuth",
            "Margaret Hamilton",
            "Ken Thompson",
            "Frances Allen",
            "John Backus",
            "Niklaus Wirth",
        ],
    ),
    "LOC": (
        "in",
        [
            "Oslo",
            "Lisbon",
            "Nairobi",
            "Kyoto",
            "Santiago",
            "Reykjavik",
            "Montreal",
            "Zurich",
            "Hanoi",
            "Lagos",
            "Buenos Aires",
            "New Delhi",
        ],
    ),
    "ORG": (
        "at",
        [
            "Acme Corp",
            "Globex",
            "Initech",
            "Umbrella Labs",
            "Stark Industries",
            "Wayne Enterprises",
            "Hooli",
            "Vandelay Industries",
            "Cyberdyne Systems",
            "Soylent Co",
            "Tyrell Corporation",
            "Aperture Science",
        ],
    ),
    "MISC": (
        "the",
        [
            "Olympics",
            "Nobel Prize",
            "Turing Award",
            "World Cup",
            "Renaissance",
            "Esperanto",
            "Byzantine",
            "Victorian",
            "Mandarin",
            "Gothic",
            "Baroque",
            "Celtic",
        ],
    ),
}


def tagged_sentence(sentence: str, rng: random.Random) -> list[tuple[str, str]]:
    """The sentence's words tagged O, with one or two names inserted after their hint word."""
    words = [(w, "O") for w in sentence.split()]
    for _ in range(rng.choice((1, 2))):
        kind = rng.choice(sorted(ENTITIES))
        hint, names = ENTITIES[kind]
        name = rng.choice(names).split()
        mention = [(hint, "O")] + [(w, ("B-" if i == 0 else "I-") + kind) for i, w in enumerate(name)]
        at = rng.randrange(len(words) + 1)
        words[at:at] = mention
    return words


def write_conll(path: str, sentences_: list[list[tuple[str, str]]]) -> None:
    """CoNLL-2003's layout: -DOCSTART-, then a token per line (word, POS, chunk, NER; the middle two
    unknown here), a blank line after each sentence."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        for sentence in sentences_:
            f.writelines(f"{word} _ _ {tag}\n" for word, tag in sentence)
            f.write("\n")


def squad_articles(texts: list[str], rng: random.Random) -> dict:
    """SQuAD v1.1's layout: one article per 20 contexts, each context with its two questions."""
    paragraphs = []
    for i in range(0, len(texts) - 2, 3):
        words = [(w, None) for w in " ".join(texts[i : i + 3]).split()]
        for kind in ("PER", "LOC"):
            hint, names = ENTITIES[kind]
            # not inside a name
            at = rng.choice([j for j in range(len(words) + 1) if j == len(words) or words[j][1] is None])
            words[at:at] = [(hint, None)] + [(w, kind) for w in rng.choice(names).split()]
        context, answers = "", {}
        for word, kind in words:
            context += " " if context else ""
            if kind and kind not in answers:
                answers[kind] = {"text": word, "answer_start": len(context)}
            elif kind:
                answers[kind]["text"] += " " + word
            context += word
        qas = [
            {"id": f"{len(paragraphs)}-{kind}", "question": question, "answers": [answers[kind]]}
            for kind, question in (("PER", "Which person is named?"), ("LOC", "Which place is named?"))
        ]
        paragraphs.append({"context": context, "qas": qas})
    return {
        "version": "1.1",
        "data": [{"title": f"topics {i}", "paragraphs": paragraphs[i : i + 20]} for i in range(0, len(paragraphs), 20)],
    }


def continuation_chat(sentence: str) -> dict:
    """A conversation: the user gives a sentence's first half, the assistant the rest."""
    words = sentence.split()
    half = len(words) // 2
    return {
        "messages": [
            {"role": "user", "content": "Continue: " + " ".join(words[:half])},
            {"role": "assistant", "content": " ".join(words[half:])},
        ]
    }


def write_jsonl(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)


def write_csv(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write(out_dir: str) -> dict[str, str]:
    """Write the proxy datasets under out_dir; return their folders by name."""
    rng = random.Random(SEED)
    splits = topic_sentences()
    folders = {name: os.path.join(out_dir, name) for name in PROXIES}
    pair_topics = {
        n for n in splits["train"] if len(splits["train"][n]) + len(splits["validation"][n]) >= MIN_TOPIC_SENTENCES
    }
    for split, count in PAIRS.items():
        by_topic = {n: s for n, s in splits[split].items() if n in pair_topics}
        write_csv(os.path.join(folders["mrpc_proxy"], f"{split}.csv"), restatement_pairs(by_topic, count, rng))
    for split, rows in largest_topic_sentences(splits, rng).items():
        write_csv(os.path.join(folders["yelp_proxy"], f"{split}.csv"), rows)
    os.makedirs(folders["wikitext_proxy"], exist_ok=True)
    write_pydoc_topics(folders["wikitext_proxy"], ("wiki.train.raw", "wiki.valid.raw"))
    for split, by_topic in splits.items():
        tagged = [tagged_sentence(s, rng) for name in sorted(by_topic) for s in by_topic[name]]
        write_conll(os.path.join(folders["conll_proxy"], f"{split}.txt"), tagged)
        texts = [s for name in sorted(by_topic) for s in by_topic[name]]
        write_jsonl(
            os.path.join(folders["summary_proxy"], f"{split}.jsonl"),
            [{"document": s, "summary": " ".join(s.split()[:6])} for s in texts],
        )
        write_jsonl(
            os.path.join(folders["translation_proxy"], f"{split}.jsonl"),
            [{"translation": {"ro": " ".join(s.split()[:8][::-1]), "en": " ".join(s.split()[:8])}} for s in texts],
        )
        write_jsonl(os.path.join(folders["chat_proxy"], f"{split}.jsonl"), [continuation_chat(s) for s in texts])
        os.makedirs(folders["squad_proxy"], exist_ok=True)
        with open(os.path.join(folders["squad_proxy"], f"{split}.json"), "w", encoding="utf-8") as f:
            json.dump(squad_articles(texts, rng), f)
    return folders


def write_digits(folder: str, validation_share: float = 0.2, seed: int = 0) -> str:
    """scikit-learn's handwritten digits as `train.parquet` and `validation.parquet` in `folder`:
    8x8 grayscale PNG images in an Image column, their digit in a `label` ClassLabel column, split
    at random (seeded) as run_image_classification.py splits a set without a validation split."""
    import numpy as np
    from datasets import ClassLabel, Dataset, Features, Image
    from PIL import Image as PILImage
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = [PILImage.fromarray(np.round(image * PIXEL_SCALE).astype(np.uint8), mode="L") for image in digits.images]
    features = Features({"image": Image(), "label": ClassLabel(names=[str(d) for d in range(10)])})
    split = Dataset.from_dict({"image": images, "label": digits.target.tolist()}, features=features).train_test_split(
        test_size=validation_share, seed=seed
    )
    os.makedirs(folder, exist_ok=True)
    split["train"].to_parquet(os.path.join(folder, "train.parquet"))
    split["test"].to_parquet(os.path.join(folder, "validation.parquet"))
    return folder


def proxy_folder(name: str, cache_dir: str) -> str:
    """The folder of `data.proxy=name` under `cache_dir`, written on first use (all the pydoc proxies
    at once, in seconds; the digits on their own), each in one rename so an interrupted write
    leaves nothing behind. Keyed by the Python version, whose pydoc topics the proxies are made from."""
    root = os.path.join(cache_dir, "offline_data", f"py{sys.version_info.major}.{sys.version_info.minor}")
    if name == DIGITS:
        return atomic_dir(os.path.join(root, DIGITS), write_digits)
    return os.path.join(atomic_dir(os.path.join(root, "pydoc_proxies"), write), name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="folder to write the proxy datasets' folders into")
    out_dir = parser.parse_args().out_dir
    for name, folder in {**write(out_dir), DIGITS: write_digits(os.path.join(out_dir, DIGITS))}.items():
        print(f"{name}: {folder}")


if __name__ == "__main__":
    main()
