/* The body of a JSON string, 32 bytes at a time with AVX2: where it stops (a quote, a backslash or a raw
   control character) and whether the UTF-8 before that is well formed, in one pass over the bytes.

   Why: text in a record is often not ASCII (the long corpus of benchmarks/bench_types.py has a non-ASCII
   character every few words). The SSE2 loop of _types.c leaves its vector loop at each of them and checks
   the sequence byte by byte, which made that corpus type at 0.75 GB/s on one core. Here a block's UTF-8
   is checked whole by the method of Keiser and Lemire ("Validating UTF-8 in less than one instruction per
   byte", Software: Practice and Experience, 2021): three 16-entry table lookups on the nibbles of each
   byte and the byte before it, and one test that a continuation is where a 3- or 4-byte lead wants one.
   The result is Unicode's table 3-7, as Python's strict decoder and _types.c's scalar check take it: no
   overlong forms, no surrogates, nothing past U+10FFFF, no sequence cut short (tests/test_string_ways.py
   runs every way on every lead byte with every second byte, at every position across a block boundary).

   The check of a block needs the block before it (a sequence can straddle them); the string's first block
   is checked as if ASCII came before it (the opening quote did). A sequence cut short by the byte where the
   body stops is found at that byte, which is ASCII; errors past it are not looked at.

   Compiled for AVX2 only inside these functions (target attribute), and used when the CPU has it
   (`__builtin_cpu_supports`); elsewhere _types.c keeps its SSE2 and scalar loops. */
#ifndef SJSONL_STRING_AVX2_H
#define SJSONL_STRING_AVX2_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define STRING_AVX2 1
#define AVX2_FN __attribute__((target("avx2")))

/* The error classes of a pair of bytes (the byte before, this byte); a bit survives the three lookups only
   when all three agree on it. */
#define TOO_SHORT (1 << 0)  /* a lead or ASCII where a continuation is due: 11______ 0_______, 11______ 11______ */
#define TOO_LONG (1 << 1)   /* a continuation after ASCII: 0_______ 10______ */
#define OVERLONG_3 (1 << 2) /* 11100000 100_____ */
#define TOO_LARGE (1 << 3)  /* past U+10FFFF: 11110100 1001____, 11110100 101_____, 11110101.. 10______ */
#define SURROGATE (1 << 4)  /* 11101101 101_____ */
#define OVERLONG_2 (1 << 5) /* 1100000_ 10______ */
#define TOO_LARGE_1000 (1 << 6) /* 11110101.. 1000____ */
#define OVERLONG_4 (1 << 6) /* 11110000 1000____ (shares the bit: the leads tell them apart) */
#define TWO_CONTS (1 << 7)  /* two continuations: an error unless a 3- or 4-byte lead wants them */
#define CARRY (TOO_SHORT | TOO_LONG | TWO_CONTS)

/* The three tables, by the nibble that indexes them (the AVX-512 loop of _string_avx512.h takes them too). */
#define BYTE_1_HIGH \
    TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, /* 0_______ ASCII */ \
    TWO_CONTS, TWO_CONTS, TWO_CONTS, TWO_CONTS,                                     /* 10______ */ \
    TOO_SHORT | OVERLONG_2,                                                         /* 1100____ */ \
    TOO_SHORT,                                                                      /* 1101____ */ \
    TOO_SHORT | OVERLONG_3 | SURROGATE,                                             /* 1110____ */ \
    TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4                              /* 1111____ */
#define BYTE_1_LOW \
    CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4, /* ____0000 */ \
    CARRY | OVERLONG_2,                           /* ____0001 */ \
    CARRY, CARRY,                                 /* ____001_ */ \
    CARRY | TOO_LARGE,                            /* ____0100 */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000,           /* ____0101 */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000, /* ____011_ */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000, /* ____1000, ____1001 */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000, /* ____1010, ____1011 */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000,                                     /* ____1100 */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE,                         /* ____1101 */ \
    CARRY | TOO_LARGE | TOO_LARGE_1000, CARRY | TOO_LARGE | TOO_LARGE_1000  /* ____111_ */
#define BYTE_2_HIGH \
    TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, /* 0_______ */ \
    TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,           /* 1000____ */ \
    TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,                             /* 1001____ */ \
    TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,                              /* 1010____ */ \
    TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,                              /* 1011____ */ \
    TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT                                              /* 11______ */

#define TABLE16(...) _mm256_setr_epi8(__VA_ARGS__, __VA_ARGS__)

/* The bytes of `input` shifted back by n, the first n from the end of `prev`. */
#define PREV_BYTES(input, prev, n) \
    _mm256_alignr_epi8((input), _mm256_permute2x128_si256((prev), (input), 0x21), 16 - (n))

/* Keiser and Lemire's check on vectors of W bits, written once for both widths (W = 256 here, 512 in
   _string_avx512.h: the intrinsics' names are _mm<W>_… and …_si<W>): defines NAME(input, prev), whose
   non-zero bytes are where the UTF-8 of `input` (after `prev`) is not well formed. TABLE builds a vector of
   the 16-entry table in every lane; PREV shifts `input` back by n bytes, the first n from the end of `prev`. */
#define HIGH_NIBBLES(W, x) _mm##W##_and_si##W(_mm##W##_srli_epi16((x), 4), _mm##W##_set1_epi8(0x0F))
#define DEFINE_UTF8_ERRORS(NAME, TARGET, W, TABLE, PREV)                                                   \
    static TARGET inline __m##W##i NAME(__m##W##i input, __m##W##i prev) {                                \
        __m##W##i prev1 = PREV(input, prev, 1), prev2 = PREV(input, prev, 2), prev3 = PREV(input, prev, 3); \
        __m##W##i special = _mm##W##_and_si##W(                                                            \
            _mm##W##_and_si##W(                                                                            \
                _mm##W##_shuffle_epi8(TABLE(BYTE_1_HIGH), HIGH_NIBBLES(W, prev1)),                         \
                _mm##W##_shuffle_epi8(TABLE(BYTE_1_LOW),                                                  \
                                      _mm##W##_and_si##W(prev1, _mm##W##_set1_epi8(0x0F)))),                \
            _mm##W##_shuffle_epi8(TABLE(BYTE_2_HIGH), HIGH_NIBBLES(W, input)));                            \
        /* a continuation is due where the byte two back is a 3- or 4-byte lead, or three back a 4-byte   \
           one: there TWO_CONTS is right, and anything else is an error */                                 \
        __m##W##i due = _mm##W##_or_si##W(_mm##W##_subs_epu8(prev2, _mm##W##_set1_epi8((char)(0xE0 - 0x80))), \
                                          _mm##W##_subs_epu8(prev3, _mm##W##_set1_epi8((char)(0xF0 - 0x80)))); \
        return _mm##W##_xor_si##W(_mm##W##_and_si##W(due, _mm##W##_set1_epi8((char)0x80)), special);       \
    }

DEFINE_UTF8_ERRORS(utf8_errors, AVX2_FN, 256, TABLE16, PREV_BYTES)

/* The 32 bytes at p; past `limit` (the end of the buffer), quotes: a stop past the string's end. */
static AVX2_FN inline __m256i load_block(const unsigned char *p, const unsigned char *limit) {
    if (limit - p >= 32) return _mm256_loadu_si256((const __m256i *)p);
    unsigned char tail[32];
    memset(tail, '"', sizeof tail);
    memcpy(tail, p, (size_t)(limit - p));
    return _mm256_loadu_si256((const __m256i *)tail);
}

/* Where a block has a quote, a backslash or a control byte. */
static AVX2_FN inline uint32_t stop_bytes(__m256i x) {
    __m256i stops = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(x, _mm256_set1_epi8('"')),
                                                    _mm256_cmpeq_epi8(x, _mm256_set1_epi8('\\'))),
                                    _mm256_cmpeq_epi8(_mm256_min_epu8(x, _mm256_set1_epi8(0x1F)), x));
    return (uint32_t)_mm256_movemask_epi8(stops);
}

/* The body of a string from p: the first quote, backslash or control byte before `end`, when the UTF-8
   before it is well formed; NULL when there is none before `end` or the UTF-8 is not. Whole blocks are
   read up to `limit` (>= end: the bytes after the record are readable but not looked at).

   Two loops: blocks of ASCII are only searched for a stop; from the first block with a byte past ASCII to
   the end of the string every block is checked as UTF-8, without a branch on it. Why: one loop deciding
   block by block typed the long corpus (a non-ASCII character every few words) at 2.4 GB/s on one core,
   these two at 3.1 GB/s; checking every block from the first cost ASCII text a third of its speed. */
static AVX2_FN const unsigned char *string_body_avx2(const unsigned char *p, const unsigned char *end,
                                                     const unsigned char *limit) {
    for (; p < end; p += 32) {
        __m256i x = load_block(p, limit);
        if (_mm256_movemask_epi8(x)) break; /* past ASCII: this block and the rest are checked below */
        uint32_t stop_mask = stop_bytes(x);
        if (stop_mask) {
            const unsigned char *at = p + __builtin_ctz(stop_mask);
            return at < end ? at : NULL;
        }
    }
    __m256i prev = _mm256_setzero_si256(), errors = _mm256_setzero_si256(); /* ASCII before: as if zeros */
    for (; p < end; p += 32) {
        __m256i x = load_block(p, limit);
        __m256i e = utf8_errors(x, prev);
        uint32_t stop_mask = stop_bytes(x);
        if (stop_mask) { /* errors up to and including the stop */
            uint64_t upto = (2ULL << __builtin_ctz(stop_mask)) - 1;
            uint32_t bad = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(e, _mm256_setzero_si256()));
            const unsigned char *at = p + __builtin_ctz(stop_mask);
            if ((bad & upto) || at >= end || !_mm256_testz_si256(errors, errors)) return NULL;
            return at;
        }
        errors = _mm256_or_si256(errors, e);
        prev = x;
    }
    return NULL;
}

#endif
#endif
