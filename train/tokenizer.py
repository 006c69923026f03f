"""BPE vocabulary trainer and an encoder that gives the ids mcullm's llama2.c / SentencePiece tokenizer gives.

Vocabulary layout (what src/tokenizer/llama2c_tokenizer_host.cpp expects): 0 <unk>, 1 <s> (BOS), 2 </s> (EOS),
3..258 the byte pieces <0x00>..<0xFF> (byte fallback: id = byte + 3), then the merged pieces in merge
order (score -rank: the C++ encoder merges the highest score first), then the single characters seen in
training (score -1e10: never produced by a merge). Spaces are literal here; the GGUF spells them U+2581.

Merges are learned inside words only; a word is a run of non-space characters with the space before it
(" upon"), or a lone newline run. No piece holds a space after its first character, so the C++ encoder's
merges over the whole text never cross a word and encoding word by word (cached) gives the same ids.
"""
import collections
import heapq
import re

N_SPECIAL = 3
BOS, EOS = 1, 2
CHAR_SCORE = -1e10
_WORD = re.compile(r" ?[^ \n]+|\n+| +(?! )| ")


def split_words(text):
    return _WORD.findall(text)


def train_bpe(text, vocab_size, min_char_count=2, log=print):
    """Returns (pieces, scores) for vocab_size entries: specials, bytes, merges, then characters."""
    words = collections.Counter(split_words(text))
    chars = collections.Counter()
    for w, n in words.items():
        for c in w:
            chars[c] += n
    alphabet = sorted(c for c, n in chars.items() if n >= min_char_count)
    if " " not in alphabet:
        alphabet.append(" ")  # the dummy-prefix piece the encoder needs
    n_merges = vocab_size - N_SPECIAL - 256 - len(alphabet)
    if n_merges < 0:
        raise ValueError(f"vocabulary {vocab_size} is smaller than the {N_SPECIAL + 256 + len(alphabet)} base pieces")
    known = set(alphabet)
    # Words as symbol lists; characters outside the alphabet stay symbols that never merge.
    seqs = [list(w) for w in words]
    counts = [words[w] for w in words]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for i, s in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            if a in known and b in known:
                pair_count[a, b] += counts[i]
                where[a, b].add(i)
    merges = []
    heap = [(-n, p) for p, n in pair_count.items()]
    heapq.heapify(heap)
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or -neg <= 0:
            continue  # stale entry
        a, b = pair
        new = a + b
        merges.append(new)
        known.add(new)
        touched = collections.Counter()
        for i in list(where.pop(pair, ())):
            s, n = seqs[i], counts[i]
            for x, y in zip(s, s[1:]):
                if x in known and y in known:
                    pair_count[x, y] -= n
                    touched[x, y] += 0
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            seqs[i] = out
            for x, y in zip(out, out[1:]):
                if x in known and y in known:
                    pair_count[x, y] += n
                    where[x, y].add(i)
                    touched[x, y] += 0
        pair_count.pop(pair, None)
        for p in touched:
            if pair_count.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_count[p], p))
        if len(merges) % 500 == 0:
            log(f"bpe: {len(merges)}/{n_merges} merges")
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    scores = [0.0] * (N_SPECIAL + 256)
    seen = set(pieces)
    for r, m in enumerate(merges):
        if m not in seen:  # a merge can rebuild a piece learned before; keep the first
            pieces.append(m)
            scores.append(-float(r))
            seen.add(m)
    for c in alphabet:
        if c not in seen:
            pieces.append(c)
            scores.append(CHAR_SCORE)
            seen.add(c)
    while len(pieces) < vocab_size:  # duplicates left room: pad with unreachable pieces
        pieces.append(f"<pad{len(pieces)}>")
        scores.append(CHAR_SCORE)
    return pieces, scores


class Tokenizer:
    """The encoder of src/tokenizer/llama2c_tokenizer_host.cpp (run.c's): codepoints, byte fallback, then
    repeated merge of the adjacent pair whose concatenation scores highest (leftmost on ties)."""

    def __init__(self, pieces, scores):
        self.pieces = list(pieces)
        self.scores = [float(s) for s in scores]
        self.index = {}
        for i, p in enumerate(self.pieces):
            self.index.setdefault(p, i)
        self.space = self.index[" "]
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.pieces)

    def _encode_word(self, w):
        ids = []
        for c in w:
            i = self.index.get(c)
            if i is None:
                ids.extend(b + N_SPECIAL for b in c.encode("utf-8"))
            else:
                ids.append(i)
        # Pairs by score, then leftmost: a word is short, so rescanning is cheap.
        while len(ids) > 1:
            best, at = None, -1
            for j in range(len(ids) - 1):
                k = self.index.get(self.pieces[ids[j]] + self.pieces[ids[j + 1]])
                if k is not None and self.scores[k] > CHAR_SCORE and (best is None or self.scores[k] > self.scores[best]):
                    best, at = k, j
            if best is None:
                break
            ids[at:at + 2] = [best]
        return ids

    def encode(self, text, bos=True):
        """BOS, the dummy-prefix space, then the text (as mcullm encodes a prompt or an eval chunk)."""
        out = [BOS] if bos else []
        if not text:
            return out
        # The dummy prefix joins the first word when that word has no space of its own.
        words = split_words(" " + text)
        for w in words:
            ids = self._cache.get(w)
            if ids is None:
                ids = self._cache[w] = self._encode_word(w)
            out.extend(ids)
        return out

    def decode(self, ids):
        out = bytearray()
        prev = -1
        for i in ids:
            p = self.pieces[i]
            if i < N_SPECIAL:
                prev = i
                continue
            if N_SPECIAL <= i < N_SPECIAL + 256:
                out.append(i - N_SPECIAL)
            else:
                if prev == BOS and p.startswith(" "):
                    p = p[1:]
                out += p.encode("utf-8")
            prev = i
        return out.decode("utf-8", errors="replace")


def eval_chunks(text, limit=1000):
    """apps/mcullm/cmd_eval.cpp's chunks: paragraphs (split at blank lines) packed greedily, joined by
    blank lines, while chunk + "\\n\\n" + paragraph + "\\n\\n" fits in limit bytes."""
    chunks, cur = [], b""
    for p in text.encode("utf-8").split(b"\n\n"):
        if not p:
            continue
        if cur and len(cur) + 2 + len(p) + 2 <= limit:
            cur += b"\n\n" + p
            continue
        if cur:
            chunks.append(cur.decode("utf-8"))
        cur = p
    if cur:
        chunks.append(cur.decode("utf-8"))
    return chunks


def stories_as_eval_text(text):
    """The training file (stories split by <|endoftext|>, paragraphs by newlines) in the validation
    file's layout: every paragraph followed by a blank line."""
    paras = [p.strip() for p in text.replace("<|endoftext|>", "\n").split("\n")]
    return "\n\n".join(p for p in paras if p)
