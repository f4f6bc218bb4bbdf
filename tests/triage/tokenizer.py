"""tokenizer.py: a pure-Python SentencePiece-style tokenizer for record_torch.py's token loop
(the detokenization a serving loop does on the host every step). Its vocabulary is made up
(seeded): 256 byte-fallback pieces <0x00>..<0xFF>, then word pieces with the "\u2581" space
marker; decode() does what LlamaTokenizer(Fast).decode does per call: ids to pieces, byte
runs to UTF-8, the space marker to spaces, the clean-up pass. Standard library only."""
import random
import re

SPACE = "\u2581"
_CLEANUP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]
_BYTE = re.compile(r"^<0x([0-9A-F]{2})>$")


class LlamaTokenizer:
    def __init__(self, vocab_size=32000, seed=0):
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.pieces = ["<0x%02X>" % b for b in range(256)]
        seen = set()
        while len(self.pieces) < vocab_size:
            n = rng.randint(1, 7)
            w = "".join(rng.choice(letters) for _ in range(n))
            if rng.random() < 0.55:
                w = SPACE + w
            elif rng.random() < 0.1:
                w = rng.choice([".", ",", "?", "!", "'s", "n't"])
            if w not in seen:
                seen.add(w)
                self.pieces.append(w)
        self.special = {0, 1, 2}

    def convert_ids_to_tokens(self, ids, skip_special_tokens=True):
        return [self.pieces[i] for i in ids if not (skip_special_tokens and i in self.special)]

    def convert_tokens_to_string(self, tokens):
        out = []
        buf = bytearray()
        for t in tokens:
            m = _BYTE.match(t)
            if m:
                buf.append(int(m.group(1), 16))
                continue
            if buf:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
            out.append(t.replace(SPACE, " "))
        if buf:
            out.append(buf.decode("utf-8", errors="replace"))
        text = "".join(out)
        return text[1:] if text.startswith(" ") else text

    def clean_up_tokenization(self, text):
        for a, b in _CLEANUP:
            text = text.replace(a, b)
        return text

    def decode(self, ids, skip_special_tokens=True):
        return self.clean_up_tokenization(self.convert_tokens_to_string(self.convert_ids_to_tokens(ids, skip_special_tokens)))
