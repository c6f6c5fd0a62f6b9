/* The body of a JSON string, 64 bytes at a time with AVX-512: _string_avx2.h's loop (the same stops, the
   same UTF-8 check by Keiser and Lemire's method, on the same tables) on blocks twice as wide, with the
   compares giving bit masks directly.

   Why: on the long corpus of benchmarks/bench_types.py (~1.8 KB records, mostly text with a non-ASCII
   character every few words) string bodies were a quarter of the index scan and type pass together on
   one core (perf: string_body_avx2 26%); a block of 64 bytes costs about what one of 32 did. A block that
   would run past `limit` is loaded with a mask, which reads none of the bytes it leaves out (they are
   quotes: a stop past the string's end).

   Compiled for AVX-512 (F and BW) only inside these functions (target attribute), and used when the CPU
   has both (`__builtin_cpu_supports`); the tests run every way the CPU has on the same records
   (tests/test_fast_types.py, `string_way()`). */
#ifndef SJSONL_STRING_AVX512_H
#define SJSONL_STRING_AVX512_H

#include "_string_avx2.h"

#ifdef STRING_AVX2
#define STRING_AVX512 1
#define AVX512_FN __attribute__((target("avx512f,avx512bw")))

#define TABLE16_512(...) _mm512_broadcast_i32x4(_mm_setr_epi8(__VA_ARGS__))

/* The bytes of `input` shifted back by n, the first n from the end of `prev`: each 16-byte lane joined
   with the lane before it (the first with prev's last), then shifted. */
#define PREV_BYTES_512(input, prev, n)                                                                   \
    _mm512_alignr_epi8((input),                                                                        \
                       _mm512_permutex2var_epi64((prev), _mm512_set_epi64(13, 12, 11, 10, 9, 8, 7, 6), \
                                                 (input)),                                             \
                       16 - (n))

static AVX512_FN inline __m512i high_nibbles_512(__m512i x) {
    return _mm512_and_si512(_mm512_srli_epi16(x, 4), _mm512_set1_epi8(0x0F));
}

/* Bit k set where byte k of `input` (after `prev`) is not well-formed UTF-8 (see utf8_errors). */
static AVX512_FN inline uint64_t utf8_errors_512(__m512i input, __m512i prev) {
    const __m512i byte_1_high_table = TABLE16_512(BYTE_1_HIGH);
    const __m512i byte_1_low_table = TABLE16_512(BYTE_1_LOW);
    const __m512i byte_2_high_table = TABLE16_512(BYTE_2_HIGH);
    __m512i prev1 = PREV_BYTES_512(input, prev, 1);
    __m512i special = _mm512_and_si512(
        _mm512_and_si512(_mm512_shuffle_epi8(byte_1_high_table, high_nibbles_512(prev1)),
                         _mm512_shuffle_epi8(byte_1_low_table, _mm512_and_si512(prev1, _mm512_set1_epi8(0x0F)))),
        _mm512_shuffle_epi8(byte_2_high_table, high_nibbles_512(input)));
    __m512i prev2 = PREV_BYTES_512(input, prev, 2), prev3 = PREV_BYTES_512(input, prev, 3);
    __m512i due = _mm512_or_si512(_mm512_subs_epu8(prev2, _mm512_set1_epi8((char)(0xE0 - 0x80))),
                                  _mm512_subs_epu8(prev3, _mm512_set1_epi8((char)(0xF0 - 0x80))));
    due = _mm512_and_si512(due, _mm512_set1_epi8((char)0x80));
    __m512i errors = _mm512_xor_si512(due, special);
    return (uint64_t)_mm512_test_epi8_mask(errors, errors);
}

/* The 64 bytes at p; past `limit` (the end of the buffer, not read), quotes. */
static AVX512_FN inline __m512i load_block_512(const unsigned char *p, const unsigned char *limit) {
    if (limit - p >= 64) return _mm512_loadu_si512((const void *)p);
    __mmask64 inside = (__mmask64)((1ULL << (limit - p)) - 1); /* 1..63 bytes: p < end <= limit */
    return _mm512_mask_loadu_epi8(_mm512_set1_epi8('"'), inside, (const void *)p);
}

/* Bit k set where byte k is a quote, a backslash or a control byte. */
static AVX512_FN inline uint64_t stop_bytes_512(__m512i x) {
    return (uint64_t)(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('"')) |
                      _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('\\')) |
                      _mm512_cmple_epu8_mask(x, _mm512_set1_epi8(0x1F)));
}

/* string_body_avx2 with 64-byte blocks: the same two loops, the same answers. */
static AVX512_FN const unsigned char *string_body_avx512(const unsigned char *p, const unsigned char *end,
                                                         const unsigned char *limit) {
    for (; p < end; p += 64) {
        __m512i x = load_block_512(p, limit);
        if (_mm512_movepi8_mask(x)) break; /* past ASCII: this block and the rest are checked below */
        uint64_t stop_mask = stop_bytes_512(x);
        if (stop_mask) {
            const unsigned char *at = p + __builtin_ctzll(stop_mask);
            return at < end ? at : NULL;
        }
    }
    __m512i prev = _mm512_setzero_si512(); /* ASCII before: as if zeros */
    uint64_t errors = 0;
    for (; p < end; p += 64) {
        __m512i x = load_block_512(p, limit);
        uint64_t e = utf8_errors_512(x, prev);
        uint64_t stop_mask = stop_bytes_512(x);
        if (stop_mask) { /* errors up to and including the stop (at bit 63, 2 << 63 wraps to 0: all bits) */
            uint64_t upto = (2ULL << __builtin_ctzll(stop_mask)) - 1;
            const unsigned char *at = p + __builtin_ctzll(stop_mask);
            if ((e & upto) || at >= end || errors) return NULL;
            return at;
        }
        errors |= e;
        prev = x;
    }
    return NULL;
}

#endif
#endif
