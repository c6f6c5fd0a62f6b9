"""The shuffle order written out from its specification, in plain Python, for tests that must not take their
expected order from the code they test (``sjsonl.sampling.permutation`` is the implementation; this is the
spec: keys from BLAKE2b of ``(n, seed, epoch)``, an 8-round alternating unbalanced Feistel network on the
smallest ``2**w >= n``, cycle walking back into ``[0, n)``)."""

from __future__ import annotations

import hashlib

_M64 = (1 << 64) - 1


def reference_order(n: int, seed: int = 0, epoch: int = 0, positions=None) -> list[int]:
    """The records ``Permutation(n, seed, epoch)`` visits at ``positions`` (default: all of ``[0, n)``)."""
    material = f"sjsonl.Permutation/v2/n={n}/seed={seed}/epoch={epoch}".encode()
    digest = hashlib.blake2b(material, digest_size=64).digest()
    digest += hashlib.blake2b(material + b"/2", digest_size=64).digest()
    words = [int.from_bytes(digest[8 * i : 8 * i + 8], "little") for i in range(16)]
    keys, multipliers = words[:8], [word | 1 for word in words[8:]]
    width = max(1, (n - 1).bit_length())

    def encrypt(x: int) -> int:
        high_bits, low_bits = width // 2, width - width // 2
        high, low = x >> low_bits, x & ((1 << low_bits) - 1)
        for key, multiplier in zip(keys, multipliers):
            if high_bits:  # the top high_bits bits of a 64-bit multiply-shift hash of the low part
                high ^= (((low ^ key) * multiplier) & _M64) >> (64 - high_bits)
            high, low, high_bits, low_bits = low, high, low_bits, high_bits
        return (high << low_bits) | low

    def at(i: int) -> int:
        x = encrypt(i)
        while x >= n:  # cycle walking
            x = encrypt(x)
        return x

    return [at(i) for i in (range(n) if positions is None else positions)]
