def whitespace_tokens(text: str) -> list[str]:
    return [t for t in text.split() if t]


def pack(sequences: list[list[int]], max_len: int) -> list[list[int]]:
    packed: list[list[int]] = []
    current: list[int] = []
    for seq in sequences:
        if len(seq) > max_len:
            raise ValueError("sequence longer than max_len")
        if len(current) + len(seq) > max_len:
            packed.append(current)
            current = []
        current = current + seq
    if current:
        packed.append(current)
    return packed
