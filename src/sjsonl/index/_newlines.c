/* The newline scan of sjsonl.index.scan, compiled: one vector pass per chunk, offsets written straight
 * into the output array in their final width, the GIL released so scan threads run in parallel.
 *
 *   count(data) -> int                  newlines in data
 *   fill(data, base, out[, way]) -> int writes base + position + 1 of each newline into out (a writable
 *                                       buffer of 4- or 8-byte unsigned integers), returns how many
 *   starts(data, base, out[, way])      fill's n, with k: how many of the lines it starts begin, inside
 *     -> (n, k)                         data, with a byte that may make them blank (newline, space, tab,
 *                                       carriage return), so the caller looks at lines only when k > 0
 *   ways() -> list                      the ways this machine can take, fastest first ("avx512", "avx2",
 *                                       "memchr"); fill and starts take the first unless told (tests)
 *   starts_in_map(map, lo, hi, out)     starts over bytes [lo, hi) of a GuardedMap (sjsonl.storage._guarded),
 *     -> (n, k, digest)                 read in place under its guard (a file cut short under the scan raises,
 *                                       never SIGBUS), with the xxh3-64 digest of those bytes, taken while
 *                                       they are in the cache (the content hash's leaf: storage.content)
 *   link_xxh3(path) -> bool             find XXH3_64bits in the loaded extension at path (the xxhash
 *                                       package's: the digest is the very function storage.content calls);
 *                                       starts_in_map needs it, and the caller checks digest(b) against it
 *   digest(data) -> int                 that function's digest of data (for that check)
 *
 * The ways, chosen at run time (the build needs no -mavx flags): AVX-512 with VBMI2 compresses the byte
 * indices of a 64-byte block by its newline mask and stores 8 or 16 offsets at once; AVX2 reads the mask
 * bit by bit; memchr is a call per line (~12 ns a line on ~155-byte records, against ~2 ns). The vector
 * ways classify the byte after every newline in the same pass.
 *
 * Built by the project's setup.py as an optional extension: without a compiler, sjsonl uses the numpy
 * scan, which gives the same offsets (tests/test_scan_native.py checks both on the same inputs).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define HAVE_DLSYM 1
#endif

#include "../storage/_guarded_api.h"

static Py_ssize_t count_with_memchr(const char *p, Py_ssize_t n) {
    Py_ssize_t count = 0;
    const char *end = p + n;
    while (p < end) {
        const char *hit = memchr(p, '\n', (size_t)(end - p));
        if (hit == NULL) break;
        count++;
        p = hit + 1;
    }
    return count;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_COUNT 1
/* Counting needs no positions: 32 bytes at a time, compare and popcount (~40 GB/s from cache here, 4x
 * memchr on short records; as fast on long ones). Chosen at run time, so the build needs no -mavx2. */
__attribute__((target("avx2,popcnt"))) static Py_ssize_t count_with_avx2(const char *p, Py_ssize_t n) {
    Py_ssize_t count = 0, i = 0;
    const __m256i nl = _mm256_set1_epi8('\n');
    for (; i + 32 <= n; i += 32) {
        __m256i block = _mm256_loadu_si256((const __m256i *)(p + i));
        count += __builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(block, nl)));
    }
    for (; i < n; i++) count += p[i] == '\n';
    return count;
}
#endif

#ifdef HAVE_AVX2_COUNT
__attribute__((target("avx512f,avx512bw,popcnt"))) static Py_ssize_t count_with_avx512(const char *p, Py_ssize_t n) {
    Py_ssize_t count = 0, i = 0;
    const __m512i nl = _mm512_set1_epi8('\n');
    for (; i + 64 <= n; i += 64)
        count += (Py_ssize_t)_mm_popcnt_u64(_mm512_cmpeq_epi8_mask(_mm512_loadu_si512((const void *)(p + i)), nl));
    for (; i < n; i++) count += p[i] == '\n';
    return count;
}
#endif

static Py_ssize_t count_newlines(const char *p, Py_ssize_t n) {
#ifdef HAVE_AVX2_COUNT
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("popcnt"))
        return count_with_avx512(p, n);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) return count_with_avx2(p, n);
#endif
    return count_with_memchr(p, n);
}

static PyObject *newlines_count(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    Py_ssize_t count;
    Py_BEGIN_ALLOW_THREADS
    count = count_newlines((const char *)data.buf, data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromSsize_t(count);
}

/* The blank-line suspects: a line starting with one of these bytes may hold only whitespace. */
static inline int may_be_blank(unsigned char c) { return c == '\n' || c == ' ' || c == '\t' || c == '\r'; }

typedef struct {
    Py_ssize_t written;
    Py_ssize_t suspects;  /* lines begun in data whose first byte may_be_blank */
    int overflow;         /* 1: out too small, 2: an offset past UINT32_MAX */
} fill_result;

/* The portable way (and the one that checks each offset against uint32): memchr from newline to newline. */
static void fill_with_memchr(const char *start, Py_ssize_t n, unsigned long long base, void *out,
                             Py_ssize_t itemsize, Py_ssize_t capacity, fill_result *r) {
    const char *p = start, *end = start + n;
    while (p < end) {
        const char *hit = memchr(p, '\n', (size_t)(end - p));
        if (hit == NULL) break;
        if (r->written == capacity) { r->overflow = 1; break; }
        unsigned long long offset = base + (unsigned long long)(hit - start) + 1;
        if (itemsize == 8) {
            ((uint64_t *)out)[r->written] = (uint64_t)offset;
        } else {
            if (offset > UINT32_MAX) { r->overflow = 2; break; }
            ((uint32_t *)out)[r->written] = (uint32_t)offset;
        }
        r->written++;
        if (hit + 1 < end && may_be_blank((unsigned char)hit[1])) r->suspects++;
        p = hit + 1;
    }
}

#ifdef HAVE_AVX2_COUNT
/* 64 bytes at a time: the newline mask, and the mask of bytes that may_be_blank one byte further on (a
 * second, unaligned load), so a block's suspects are popcount(newlines & next). Offsets are written from
 * the mask bits; with room for 64 more, the first eight of a block are written without looking at the
 * count (writes past the block's own are overwritten by the next block's, or are past the final count).
 * Every offset must fit the type: the caller checks base + n first. */
/* The scalar tail of a chunk, after its whole vector blocks (shared by the vector ways). */
#define SCALAR_TAIL(T)                                                                                      \
        for (; i < n; i++) {                                                                                \
            if (p[i] != '\n') continue;                                                                     \
            if (w == capacity) { r->overflow = 1; break; }                                                  \
            out[w++] = (T)(base + (unsigned long long)i + 1);                                               \
            if (i + 1 < n && may_be_blank((unsigned char)p[i + 1])) suspects++;                             \
        }                                                                                                   \
        r->written = w;                                                                                     \
        r->suspects = suspects;

#define FILL_AVX2(NAME, T)                                                                                  \
    __attribute__((target("avx2,bmi,bmi2,popcnt"))) static void NAME(                                      \
        const char *p, Py_ssize_t n, unsigned long long base, T *out, Py_ssize_t capacity, fill_result *r) { \
        const __m256i nl = _mm256_set1_epi8('\n');                                                          \
        /* pshufb table: the byte that may_be_blank for each low nibble (0x20 at 0, \t \n \r at 9 10 13);  \
         * a byte b is a suspect when table[b & 15] == b (bytes >= 0x80 get 0 from pshufb: never equal). */ \
        const __m256i table = _mm256_setr_epi8(' ', 0, 0, 0, 0, 0, 0, 0, 0, '\t', '\n', 0, 0, '\r', 0, 0,     \
                                               ' ', 0, 0, 0, 0, 0, 0, 0, 0, '\t', '\n', 0, 0, '\r', 0, 0);   \
        Py_ssize_t w = 0, suspects = 0, i = 0;                                                              \
        for (; i + 65 <= n; i += 64) { /* the +1: the next-byte load reads p[i + 64] */                   \
            __m256i a = _mm256_loadu_si256((const __m256i *)(p + i));                                       \
            __m256i b = _mm256_loadu_si256((const __m256i *)(p + i + 32));                                  \
            uint64_t m = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, nl)) |                         \
                         ((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, nl)) << 32);        \
            if (m == 0) continue;                                                                           \
            __m256i a1 = _mm256_loadu_si256((const __m256i *)(p + i + 1));                                  \
            __m256i b1 = _mm256_loadu_si256((const __m256i *)(p + i + 33));                                 \
            uint64_t ws =                                                                                   \
                (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(table, a1), a1)) |     \
                ((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(table, b1), \
                                                                            b1))                            \
                 << 32);                                                                                    \
            Py_ssize_t k = (Py_ssize_t)_mm_popcnt_u64(m);                                                   \
            suspects += (Py_ssize_t)_mm_popcnt_u64(m & ws);                                                 \
            unsigned long long at = base + (unsigned long long)i + 1;                                       \
            if (w + 64 <= capacity) {                                                                       \
                T *o = out + w;                                                                             \
                for (int j = 0; j < 8; j++) { o[j] = (T)(at + _tzcnt_u64(m)); m = _blsr_u64(m); }           \
                for (Py_ssize_t j = 8; j < k; j++) { o[j] = (T)(at + _tzcnt_u64(m)); m = _blsr_u64(m); }    \
                w += k;                                                                                     \
            } else {                                                                                        \
                if (w + k > capacity) { r->overflow = 1; r->written = w; r->suspects = suspects; return; }  \
                for (; m; m = _blsr_u64(m)) out[w++] = (T)(at + _tzcnt_u64(m));                            \
            }                                                                                               \
        }                                                                                                   \
        SCALAR_TAIL(T)                                                                                      \
    }
FILL_AVX2(fill_avx2_u32, uint32_t)
FILL_AVX2(fill_avx2_u64, uint64_t)

/* AVX-512 with VBMI2 (Ice Lake, Zen 4 and later): a block's newline positions come out of one compress
 * of the byte indices 0..63 by the newline mask, widened and offset in a vector and stored at once (8 or
 * 16 offsets a store): no bit-by-bit loop. */
static const uint8_t iota64[64] __attribute__((aligned(64))) = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
    44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};

/* One 64-byte block at p + i whose newline mask is m (the byte after it readable); `continue`s its loop
 * when the block is done early. */
#define BLOCK_AVX512(T, PER, WIDEN_ADD)                                                                     \
    {                                                                                                       \
        __m512i next = _mm512_loadu_si512((const void *)(p + i + 1));                                       \
        __mmask64 ws = _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(table, next), next);                      \
        Py_ssize_t k = (Py_ssize_t)_mm_popcnt_u64(m);                                                       \
        suspects += (Py_ssize_t)_mm_popcnt_u64(m & ws);                                                     \
        unsigned long long at = base + (unsigned long long)i + 1;                                           \
        if (w + 64 > capacity) {                                                                            \
            if (w + k > capacity) { r->overflow = 1; r->written = w; r->suspects = suspects; return; }      \
            for (; m; m &= m - 1) out[w++] = (T)(at + (unsigned long long)__builtin_ctzll(m));              \
            continue;                                                                                       \
        }                                                                                                   \
        __m512i idx = _mm512_maskz_compress_epi8(m, iota);                                                  \
        _mm512_storeu_si512((void *)(out + w), WIDEN_ADD(_mm512_castsi512_si128(idx), at));                 \
        if (k > PER) { /* rare on any data with lines: the rest one by one */                               \
            uint8_t spill[64];                                                                              \
            _mm512_storeu_si512((void *)spill, idx);                                                        \
            for (Py_ssize_t j = PER; j < k; j++) out[w + j] = (T)(at + spill[j]);                           \
        }                                                                                                   \
        w += k;                                                                                             \
    }

/* 4 KiB at a time; blocks without a newline are skipped only after 4 KiB of long lines (fewer than 8): a
 * skip taken at random (~155-byte lines) mispredicts, and stalls the loads behind it, more than it saves. */
#define FILL_AVX512(NAME, T, PER, WIDEN_ADD)                                                                \
    __attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"))) static void NAME(                      \
        const char *p, Py_ssize_t n, unsigned long long base, T *out, Py_ssize_t capacity, fill_result *r) { \
        const __m512i nl = _mm512_set1_epi8('\n');                                                          \
        const __m512i table = _mm512_broadcast_i32x4(                                                       \
            _mm_setr_epi8(' ', 0, 0, 0, 0, 0, 0, 0, 0, '\t', '\n', 0, 0, '\r', 0, 0));                      \
        const __m512i iota = _mm512_load_si512((const void *)iota64);                                       \
        Py_ssize_t w = 0, suspects = 0, i = 0;                                                              \
        int sparse = 0;                                                                                     \
        while (i + 65 <= n) {                                                                               \
            Py_ssize_t stop = i + 4096 < n - 64 ? i + 4096 : n - 64, w_then = w;                            \
            if (sparse) {                                                                                   \
                for (; i < stop; i += 64) {                                                                 \
                    __mmask64 m = _mm512_cmpeq_epi8_mask(_mm512_loadu_si512((const void *)(p + i)), nl);    \
                    if (m == 0) continue;                                                                   \
                    BLOCK_AVX512(T, PER, WIDEN_ADD)                                                         \
                }                                                                                           \
            } else {                                                                                        \
                for (; i < stop; i += 64) {                                                                 \
                    __mmask64 m = _mm512_cmpeq_epi8_mask(_mm512_loadu_si512((const void *)(p + i)), nl);    \
                    BLOCK_AVX512(T, PER, WIDEN_ADD)                                                         \
                }                                                                                           \
            }                                                                                               \
            sparse = w - w_then < 8;                                                                        \
        }                                                                                                   \
        SCALAR_TAIL(T)                                                                                      \
    }
#define WIDEN_ADD_U32(x, at) _mm512_add_epi32(_mm512_cvtepu8_epi32(x), _mm512_set1_epi32((int)(uint32_t)(at)))
#define WIDEN_ADD_U64(x, at) _mm512_add_epi64(_mm512_cvtepu8_epi64(x), _mm512_set1_epi64((long long)(at)))
FILL_AVX512(fill_avx512_u32, uint32_t, 16, WIDEN_ADD_U32)
FILL_AVX512(fill_avx512_u64, uint64_t, 8, WIDEN_ADD_U64)
#endif

/* The ways to fill, fastest first; way_supported says which this CPU runs (checked once per call: cheap). */
enum { WAY_BEST = -1, WAY_AVX512 = 0, WAY_AVX2 = 1, WAY_MEMCHR = 2, N_WAYS = 3 };
static const char *const way_names[N_WAYS] = {"avx512", "avx2", "memchr"};

static int way_supported(int way) {
#ifdef HAVE_AVX2_COUNT
    if (way == WAY_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("popcnt");
    if (way == WAY_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
               __builtin_cpu_supports("popcnt");
#endif
    return way == WAY_MEMCHR;
}

static void fill_offsets(const char *p, Py_ssize_t n, unsigned long long base, void *out, Py_ssize_t itemsize,
                         Py_ssize_t capacity, int way, fill_result *r) {
    if (way == WAY_BEST) {
        way = WAY_AVX512;
        while (!way_supported(way)) way++;
    }
    /* uint32 offsets take a vector way only when every one fits (else the checking memchr way raises) */
    int fits = itemsize == 8 || base + (unsigned long long)n <= UINT32_MAX;
#ifdef HAVE_AVX2_COUNT
    if (way == WAY_AVX512 && fits) {
        if (itemsize == 8) fill_avx512_u64(p, n, base, (uint64_t *)out, capacity, r);
        else fill_avx512_u32(p, n, base, (uint32_t *)out, capacity, r);
        return;
    }
    if (way == WAY_AVX2 && fits) {
        if (itemsize == 8) fill_avx2_u64(p, n, base, (uint64_t *)out, capacity, r);
        else fill_avx2_u32(p, n, base, (uint32_t *)out, capacity, r);
        return;
    }
#endif
    fill_with_memchr(p, n, base, out, itemsize, capacity, r);
}

/* `out` as a writable buffer of native-order uint32 or uint64; its item size, or 0 with an exception set
   (and nothing held). */
static Py_ssize_t get_out(PyObject *target, Py_buffer *out) {
    if (PyObject_GetBuffer(target, out, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return 0;
    Py_ssize_t itemsize = out->itemsize;
    const char *fmt = (out->format && *out->format) ? out->format : "B";
    char kind = fmt[strlen(fmt) - 1];  /* "<Q", "=I", "L", ...: the type letter comes last */
    if (kind != 'I' && kind != 'L' && kind != 'Q') itemsize = 0;  /* unsigned integers only */
#if PY_LITTLE_ENDIAN
    if (fmt[0] == '>' || fmt[0] == '!') itemsize = 0;  /* written in native (little-endian) order */
#else
    if (fmt[0] == '<') itemsize = 0;
#endif
    if (itemsize != 4 && itemsize != 8) {
        PyBuffer_Release(out);
        PyErr_SetString(PyExc_TypeError, "out must be an array of native-order uint32 or uint64");
        return 0;
    }
    return itemsize;
}

/* fill's outcome as Python sees it: NULL with the error of an overflow, else 0 (a non-NULL marker). */
static int fill_failed(const fill_result *r) {
    if (r->overflow == 1) PyErr_SetString(PyExc_ValueError, "out is too small for the newlines in data");
    if (r->overflow == 2) PyErr_SetString(PyExc_OverflowError, "an offset does not fit in uint32");
    return r->overflow != 0;
}

/* fill() and starts(): parse (data, base, out), fill, and return n, or (n, suspects) with `pair`. */
static PyObject *fill_call(PyObject *args, int pair) {
    Py_buffer data, out;
    long long signed_base;
    PyObject *target;
    const char *way_name = NULL;
    if (!PyArg_ParseTuple(args, "y*LO|s", &data, &signed_base, &target, &way_name)) return NULL;
    int way = WAY_BEST;
    if (way_name != NULL) {
        for (way = 0; way < N_WAYS && strcmp(way_name, way_names[way]) != 0; way++) {}
        if (way == N_WAYS || !way_supported(way)) {
            PyBuffer_Release(&data);
            PyErr_Format(PyExc_ValueError, "no way %s on this machine (see ways())", way_name);
            return NULL;
        }
    }
    if (signed_base < 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "base must be >= 0");
        return NULL;
    }
    unsigned long long base = (unsigned long long)signed_base;
    Py_ssize_t itemsize = get_out(target, &out);
    if (!itemsize) {
        PyBuffer_Release(&data);
        return NULL;
    }
    fill_result r = {0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    fill_offsets((const char *)data.buf, data.len, base, out.buf, itemsize, out.len / itemsize, way, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (fill_failed(&r)) return NULL;
    if (pair) return Py_BuildValue("nn", r.written, r.suspects);
    return PyLong_FromSsize_t(r.written);
}

typedef unsigned long long (*Xxh3)(const void *, size_t);
static Xxh3 xxh3 = NULL;                  /* the xxhash package's XXH3_64bits, once linked */
static GuardedReadAPI *guarded = NULL;    /* sjsonl.storage._guarded's, imported at the first use */

static PyObject *newlines_link_xxh3(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    xxh3 = NULL;
#ifdef HAVE_DLSYM /* (elsewhere the index is read with pread, as without this function) */
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* only an extension already loaded: never a new one */
    if (handle != NULL) { /* the vector build chosen at run time, as the package's own calls take it */
        xxh3 = (Xxh3)dlsym(handle, "XXH3_64bits_dispatch");
        if (xxh3 == NULL) xxh3 = (Xxh3)dlsym(handle, "XXH3_64bits");
    }
#else
    (void)path;
#endif
    return PyBool_FromLong(xxh3 != NULL);
}

static PyObject *newlines_digest(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (xxh3 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "link_xxh3 first");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    unsigned long long h = xxh3(data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLongLong(h);
}

/* What starts_in_map runs on the mapped bytes, under the guard and without the GIL: the digest first (the
   bytes' first read, from memory), then the newline scan (from the cache). */
typedef struct {
    unsigned long long base, digest;
    void *out;
    Py_ssize_t itemsize, capacity;
    fill_result r;
} MapJob;

static void map_job(const unsigned char *p, Py_ssize_t n, void *arg) {
    MapJob *job = arg;
    job->digest = xxh3(p, (size_t)n);
    fill_offsets((const char *)p, n, job->base, job->out, job->itemsize, job->capacity, WAY_BEST, &job->r);
}

static PyObject *newlines_starts_in_map(PyObject *self, PyObject *args) {
    PyObject *map, *target;
    Py_ssize_t lo, hi;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "OnnO", &map, &lo, &hi, &target)) return NULL;
    if (guarded == NULL) {
        guarded = (GuardedReadAPI *)PyCapsule_Import("sjsonl.storage._guarded._read_api", 0);
        if (guarded == NULL) return NULL;
    }
    if (Py_TYPE(map) != guarded->type || xxh3 == NULL) {
        PyErr_SetString(PyExc_TypeError, "starts_in_map takes a GuardedMap, once link_xxh3 found the digest");
        return NULL;
    }
    Py_ssize_t itemsize = get_out(target, &out);
    if (!itemsize) return NULL;
    MapJob job = {(unsigned long long)(lo < 0 ? 0 : lo), 0, out.buf, itemsize, out.len / itemsize, {0, 0, 0}};
    int got = guarded->run_in_place(map, lo, hi, map_job, &job); /* (it checks [lo, hi) against the map) */
    PyBuffer_Release(&out);
    if (got < 0 || fill_failed(&job.r)) return NULL;
    return Py_BuildValue("nnK", job.r.written, job.r.suspects, job.digest);
}

static PyObject *newlines_fill(PyObject *self, PyObject *args) { return fill_call(args, 0); }

static PyObject *newlines_starts(PyObject *self, PyObject *args) { return fill_call(args, 1); }

static PyObject *newlines_ways(PyObject *self, PyObject *unused) {
    PyObject *ways = PyList_New(0);
    for (int way = 0; ways != NULL && way < N_WAYS; way++) {
        if (!way_supported(way)) continue;
        PyObject *name = PyUnicode_FromString(way_names[way]);
        if (name == NULL || PyList_Append(ways, name) < 0) Py_CLEAR(ways);
        Py_XDECREF(name);
    }
    return ways;
}

static PyMethodDef methods[] = {
    {"count", newlines_count, METH_VARARGS, "count(data) -> number of newline bytes in data"},
    {"fill", newlines_fill, METH_VARARGS,
     "fill(data, base, out) -> n: write base + i + 1 for each newline at data[i] into out"},
    {"starts", newlines_starts, METH_VARARGS,
     "starts(data, base, out) -> (n, k): fill's n, and k lines begun in data with a newline or whitespace"},
    {"ways", newlines_ways, METH_NOARGS, "ways() -> the ways fill and starts can take here, fastest first"},
    {"starts_in_map", newlines_starts_in_map, METH_VARARGS,
     "starts_in_map(map, lo, hi, out) -> (n, k, digest): starts over [lo, hi) of a GuardedMap, and their xxh3"},
    {"link_xxh3", newlines_link_xxh3, METH_VARARGS,
     "link_xxh3(path) -> bool: find XXH3_64bits in the loaded extension at path"},
    {"digest", newlines_digest, METH_VARARGS, "digest(data) -> int: the linked XXH3_64bits of data"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_newlines", NULL, -1, methods};

PyMODINIT_FUNC PyInit__newlines(void) { return PyModule_Create(&module); }
