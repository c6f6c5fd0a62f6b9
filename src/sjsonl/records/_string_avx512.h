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

DEFINE_UTF8_ERRORS(utf8_errors_512, AVX512_FN, 512, TABLE16_512, PREV_BYTES_512)

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
        __m512i bad = utf8_errors_512(x, prev);
        uint64_t e = (uint64_t)_mm512_test_epi8_mask(bad, bad); /* bit k: byte k is not well formed */
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
