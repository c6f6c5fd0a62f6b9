/* Column types of JSON Lines records in one compiled pass: the signatures of sjsonl.records.schema computed
   from the record bytes, with no Python object per record and without the GIL.

   The rules are schema.py's (its module docstring; `signature`, `merge`, `schema_of_records`), which stay
   the definition: this is a second implementation of them for the records it is sure about, tested equal to
   them (tests/test_fast_types.py). A profile of the Python pass (issue #30): ~5 µs a record, most of it
   building the record's objects only to read their types.

   `scan(data, bounds, lo, hi)` reads records k = lo, lo+1, ... < hi, record k being the bytes
   data[bounds[k]:bounds[k + 1]] (bounds: int64, relative to data). `data` is bytes-like, or a guarded map
   of a file (sjsonl.storage._guarded), read in place under its guard: no copy, and a file cut short under
   the pass raises as a slice of the map would. It stops at the first record it is not
   sure about and returns `(stop, sigs, present, objects, whole)`: the schema of records lo..stop-1 as
   schema.RecordSchema holds it (column name -> signature in the order keys first appear; name -> rows with
   a non-null value; object rows; the signature of the other rows). The caller hands record `stop` to the
   Python pass and scans on from stop + 1 — so the result is exactly the Python pass's, whatever is in the
   file. A record is handed back when:
   - it is not strict RFC 8259 JSON, as checked here in full: the grammar and nesting, numbers, strings
     (escapes, no raw control characters, well-formed UTF-8 as Python's strict decoder takes it), nothing
     but JSON whitespace around the value. That covers invalid records (the Python path raises the located
     error, or they were left out as bad lines by the caller), NaN/Infinity (floats, or refused under
     allow_nan=False), a UTF-8 BOM — whatever the decoders make of it, they decide;
   - a top-level key holds an escape (its name needs decoding) or appears twice (the decoders keep the last
     value at the first key's place);
   - an integer has more than 640 digits (json.loads refuses integers longer than
     sys.get_int_max_str_digits(), which is at least 640) or the nesting is deeper than MAXD.
   Integers are int64 by their digits: fewer than 19, or 19 that compare at most 9223372036854775807
   (...808 with a minus sign); a number with a fraction or an exponent is a float ("1.0", "1e5"), as both
   decoders parse it.

   Strings: where the CPU has AVX-512 (BW), a string's body is read 64 bytes at a time with its UTF-8 checked
   in the same pass (_string_avx512.h), where it has AVX2 32 bytes at a time (_string_avx2.h) — a short
   string's first 16 bytes are looked at inline first; elsewhere by the SSE2 loop below, which checks each
   non-ASCII sequence byte by byte. All give the same answer (the tests run every way: string_way()).

   Rectangular lists: a list value is typed by one walk that records, for each depth, the length every list
   there must have and whether its elements are lists or scalars; it is rectangular (schema._list_shape)
   exactly when those agree everywhere and no element is null or an object.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define USE_SSE2 1
#endif
#include "../storage/_guarded_api.h"
#include "_string_avx512.h"

#define MAXD 128      /* nesting deeper than this is handed back (the decoders have their own limits) */
#define MAX_DIGITS 640 /* longer integers are handed back (see the header) */
#define POS_CACHE 64  /* a record's first keys are looked for where the last record had them */

/* kinds (schema.KINDS; K_NONE is a signature's kind None: no element seen) */
enum { K_NONE, K_STR, K_INT, K_FLOAT, K_BOOL, K_JSON };
/* what the scanner found */
enum { V_FAIL = -1, V_NULL, V_BOOL, V_STR, V_INT, V_BIGINT, V_FLOAT, V_OBJECT };
#define BIT(v) (1u << (v))

typedef struct {
    int8_t set;   /* 0: no signature (a null) */
    int8_t kind;  /* K_* */
    int16_t ndim; /* -1: None (a bare []) */
} Sig;

static const Sig SIG_NULL = {0, 0, 0};
static const Sig SIG_JSON = {1, K_JSON, 0};

static inline int sig_eq(Sig a, Sig b) {
    return a.set == b.set && (!a.set || (a.kind == b.kind && a.ndim == b.ndim));
}

/* schema.merge */
static Sig merge(Sig a, Sig b) {
    if (!a.set || sig_eq(a, b)) return b;
    if (!b.set) return a;
    if ((a.kind == K_JSON && a.ndim == 0) || (b.kind == K_JSON && b.ndim == 0) || ((a.ndim == 0) != (b.ndim == 0)))
        return SIG_JSON;
    if (a.ndim >= 0 && b.ndim >= 0 && a.ndim != b.ndim) return SIG_JSON;
    int16_t ndim = a.ndim >= 0 ? a.ndim : b.ndim;
    if (a.kind == K_NONE || b.kind == K_NONE) {
        Sig s = {1, (int8_t)(a.kind != K_NONE ? a.kind : b.kind), ndim};
        return s;
    }
    int kind;
    if (a.kind == b.kind) kind = a.kind;
    else if ((a.kind == K_INT && b.kind == K_FLOAT) || (a.kind == K_FLOAT && b.kind == K_INT)) kind = K_FLOAT;
    else return SIG_JSON;
    Sig s = {1, (int8_t)kind, ndim};
    return s;
}

/* ------------------------------------------------------------------------------------------ the scanner */
typedef struct {
    const unsigned char *p, *end;
    const unsigned char *limit; /* the end of the buffer: readable past `end` (string_body_avx2) */
    /* the list being typed (shape_list): per depth, the length of its lists (-1: none seen) and what their
       elements are (0 none seen, 1 lists, 2 scalars); the leaf types seen; still rectangular; depth */
    int64_t len_at[MAXD + 1];
    int8_t child_at[MAXD + 1];
    int touched;
    unsigned types;
    int rect;
    int ndim;
} Scan;

enum { CH_UNSET, CH_LIST, CH_SCALAR };

/* bytes a string holds as they are: printable ASCII but the quote and the backslash */
static unsigned char plain[256];

static inline void skip_ws(Scan *s) {
    const unsigned char *p = s->p, *end = s->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    s->p = p;
}

static inline int is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Per lead byte: the length of its UTF-8 sequence (0: not a lead byte of a well-formed one) and the range of
   the byte after it — Unicode's table 3-7, as _utf8.c checks it: no overlong forms, no surrogates (ED A0..BF),
   nothing past U+10FFFF. Filled by init_utf8(). */
static unsigned char utf8_len[256], utf8_lo[256], utf8_hi[256];

static void init_utf8(void) {
    for (int c = 0xC2; c <= 0xF4; c++) {
        utf8_len[c] = c <= 0xDF ? 2 : c <= 0xEF ? 3 : 4;
        utf8_lo[c] = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        utf8_hi[c] = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    }
}

/* One well-formed UTF-8 sequence at p (lead byte >= 0x80): its length, or 0. */
static inline int utf8_sequence(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    int n = utf8_len[c];
    if (!n || end - p < n) return 0;
    if (p[1] < utf8_lo[c] || p[1] > utf8_hi[c]) return 0;
    if (n > 2 && (p[2] & 0xC0) != 0x80) return 0;
    if (n > 3 && (p[3] & 0xC0) != 0x80) return 0;
    return n;
}

/* A string whose opening quote is at s->p - 1: s->p moves past its closing quote. 0 if it is not a valid
   JSON string; *escaped is set when it holds an escape. */
enum { WAY_SSE2, WAY_AVX2, WAY_AVX512 };
static const char *way_names[] = {"sse2", "avx2", "avx512"};
static int way; /* how string bodies are read: the widest the CPU has, unless string_way() says less */

static int scan_string(Scan *s, int *escaped) {
    const unsigned char *p = s->p, *end = s->end;
    for (;;) {
#ifdef STRING_AVX2
        if (way >= WAY_AVX2) {
#ifdef USE_SSE2
            /* most strings are short (a key, a word): their first 16 bytes are looked at here, with no call */
            if (s->limit - p >= 16) {
                const __m128i x = _mm_loadu_si128((const __m128i *)p);
                int mask = _mm_movemask_epi8(_mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                    _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)))); /* signed: non-ASCII too */
                if (mask) {
                    p += __builtin_ctz((unsigned)mask);
                    if (p >= end) return 0;
                    if (*p < 0x80) goto special; /* the quote, an escape or a control byte */
                } else {
                    p += 16; /* ASCII so far: the wide loop goes on from here */
                }
            }
#endif
            p = way == WAY_AVX512 ? string_body_avx512(p, end, s->limit) : string_body_avx2(p, end, s->limit);
            if (!p) return 0;
            goto special;
        }
#endif
#ifdef USE_SSE2
        {
            const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
            while (end - p >= 16) {
                __m128i x = _mm_loadu_si128((const __m128i *)p);
                /* signed: bytes >= 0x80 are negative, so one compare finds control bytes and non-ASCII */
                __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                               _mm_cmplt_epi8(x, space));
                int mask = _mm_movemask_epi8(special);
                if (mask) {
                    p += __builtin_ctz((unsigned)mask);
                    goto special;
                }
                p += 16;
            }
        }
#endif
        while (p < end && plain[*p]) p++;
        if (p >= end) return 0;
#if defined(USE_SSE2) || defined(STRING_AVX2)
    special:
#endif
        {
            unsigned char c = *p;
            if (c == '"') {
                s->p = p + 1;
                return 1;
            }
            if (c == '\\') {
                if (end - p < 2) return 0;
                unsigned char e = p[1];
                *escaped = 1;
                if (e == 'u') {
                    if (end - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) return 0;
                    p += 6;
                } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                           e == 't') {
                    p += 2;
                } else {
                    return 0;
                }
                continue;
            }
            if (c < 0x20) return 0; /* a raw control character */
            do { /* a run of non-ASCII characters (CJK text) without going back to the vector loop */
                int len = utf8_sequence(p, end);
                if (!len) return 0;
                p += len;
            } while (p < end && *p >= 0x80);
        }
    }
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* A number at s->p: V_INT (within int64), V_BIGINT, V_FLOAT, or V_FAIL (not JSON's grammar, or too long an
   integer to decide here). What follows it is the caller's to check. */
static int scan_number(Scan *s) {
    const unsigned char *p = s->p, *end = s->end;
    int negative = 0, fraction = 0;
    if (*p == '-') {
        negative = 1;
        p++;
        if (p >= end) return V_FAIL;
    }
    const unsigned char *digits = p;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p)) p++;
    } else {
        return V_FAIL;
    }
    Py_ssize_t count = p - digits;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return V_FAIL;
        while (p < end && is_digit(*p)) p++;
        fraction = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !is_digit(*p)) return V_FAIL;
        while (p < end && is_digit(*p)) p++;
        fraction = 1;
    }
    s->p = p;
    if (fraction) return V_FLOAT;
    if (count < 19) return V_INT;
    if (count > MAX_DIGITS) return V_FAIL;
    if (count > 19) return V_BIGINT;
    return memcmp(digits, negative ? "9223372036854775808" : "9223372036854775807", 19) <= 0 ? V_INT : V_BIGINT;
}

static inline int literal(Scan *s, const char *word, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) return 0;
    s->p += n;
    return 1;
}

static int skip_value(Scan *s, int depth);

/* After an element or member: ',' (1, s->p past it and the whitespace after) or `close` (2, past it). */
static inline int next_or_close(Scan *s, unsigned char close) {
    skip_ws(s);
    if (s->p >= s->end) return 0;
    if (*s->p == ',') {
        s->p++;
        skip_ws(s);
        return 1;
    }
    if (*s->p == close) {
        s->p++;
        return 2;
    }
    return 0;
}

static int skip_object(Scan *s, int depth) {
    if (depth >= MAXD) return V_FAIL;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return V_OBJECT;
    }
    for (;;) {
        int escaped = 0;
        if (s->p >= s->end || *s->p != '"') return V_FAIL;
        s->p++;
        if (!scan_string(s, &escaped)) return V_FAIL;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return V_FAIL;
        s->p++;
        skip_ws(s);
        if (skip_value(s, depth + 1) == V_FAIL) return V_FAIL;
        int next = next_or_close(s, '}');
        if (next == 2) return V_OBJECT;
        if (!next) return V_FAIL;
    }
}

static int skip_array(Scan *s, int depth) {
    if (depth >= MAXD) return V_FAIL;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return V_OBJECT; /* (any container: the callers only need "not a scalar") */
    }
    for (;;) {
        if (skip_value(s, depth + 1) == V_FAIL) return V_FAIL;
        int next = next_or_close(s, ']');
        if (next == 2) return V_OBJECT;
        if (!next) return V_FAIL;
    }
}

/* Any value at s->p (no whitespace before it): what it is, or V_FAIL. Containers are V_OBJECT. */
static int skip_value(Scan *s, int depth) {
    if (s->p >= s->end) return V_FAIL;
    switch (*s->p) {
    case '"': {
        int escaped = 0;
        s->p++;
        return scan_string(s, &escaped) ? V_STR : V_FAIL;
    }
    case '{':
        return skip_object(s, depth);
    case '[':
        return skip_array(s, depth);
    case 't':
        return literal(s, "true", 4) ? V_BOOL : V_FAIL;
    case 'f':
        return literal(s, "false", 5) ? V_BOOL : V_FAIL;
    case 'n':
        return literal(s, "null", 4) ? V_NULL : V_FAIL;
    default:
        return scan_number(s);
    }
}

/* The list at s->p, at depth d of the list being typed (0: the value itself; `depth`: its nesting in the
   record): its elements' types and lengths go into the shape state. 0 if it is not valid JSON. */
static int shape_list(Scan *s, int d, int depth) {
    if (depth >= MAXD) return 0;
    if (d >= s->touched) s->touched = d + 1;
    s->p++;
    skip_ws(s);
    int64_t count = 0;
    if (s->p < s->end && *s->p == ']') {
        s->p++;
    } else {
        for (;;) {
            count++;
            if (s->p < s->end && *s->p == '[') {
                if (s->child_at[d] == CH_SCALAR) s->rect = 0;
                s->child_at[d] = CH_LIST;
                if (s->rect) {
                    if (!shape_list(s, d + 1, depth + 1)) return 0;
                } else if (skip_value(s, depth + 1) == V_FAIL) {
                    return 0;
                }
            } else {
                int v = skip_value(s, depth + 1);
                if (v == V_FAIL) return 0;
                if (v == V_NULL || v == V_OBJECT || s->child_at[d] == CH_LIST) s->rect = 0;
                s->child_at[d] = CH_SCALAR;
                s->types |= BIT(v);
            }
            int next = next_or_close(s, ']');
            if (next == 2) break;
            if (!next) return 0;
        }
    }
    if (s->len_at[d] < 0) s->len_at[d] = count;
    else if (s->len_at[d] != count) s->rect = 0;
    if (d + 1 > s->ndim) s->ndim = d + 1;
    return 1;
}

/* The signature of the value at s->p (schema.signature), or *ok = 0 when it is not valid JSON. */
static Sig value_sig(Scan *s, int depth, int *ok) {
    Sig sig = SIG_JSON;
    if (s->p < s->end && *s->p == '[') {
        for (int d = 0; d < s->touched; d++) {
            s->len_at[d] = -1;
            s->child_at[d] = CH_UNSET;
        }
        s->touched = 0;
        s->types = 0;
        s->rect = 1;
        s->ndim = 0;
        if (!shape_list(s, 0, depth)) {
            *ok = 0;
            return sig;
        }
        if (s->len_at[0] == 0) {
            sig.kind = K_NONE; /* [] : (None, None) */
            sig.ndim = -1;
            return sig;
        }
        if (!s->rect) return SIG_JSON;
        unsigned t = s->types, ints = BIT(V_INT) | BIT(V_BIGINT);
        int kind;
        if (!t) kind = K_NONE;
        else if (t == BIT(V_STR)) kind = K_STR;
        else if (t == BIT(V_BOOL)) kind = K_BOOL;
        else if (!(t & ~(ints | BIT(V_FLOAT)))) kind = (t & BIT(V_FLOAT)) ? K_FLOAT : (t & BIT(V_BIGINT)) ? K_JSON : K_INT;
        else kind = K_JSON;
        if (kind == K_JSON) return SIG_JSON;
        sig.kind = (int8_t)kind;
        sig.ndim = (int16_t)s->ndim;
        return sig;
    }
    /* a scalar's kind by its value's (objects and integers beyond int64: json) */
    static const int8_t KIND_OF_VALUE[] = {[V_BOOL] = K_BOOL, [V_STR] = K_STR, [V_INT] = K_INT,
                                           [V_BIGINT] = K_JSON, [V_FLOAT] = K_FLOAT, [V_OBJECT] = K_JSON};
    int value = skip_value(s, depth);
    if (value == V_FAIL) {
        *ok = 0;
        return sig;
    }
    if (value == V_NULL) return SIG_NULL;
    if (KIND_OF_VALUE[value] == K_JSON) return SIG_JSON;
    sig.kind = KIND_OF_VALUE[value];
    return sig;
}

/* ------------------------------------------------------------------------------------------ columns */
typedef struct {
    Py_ssize_t key; /* its bytes: at t->keys + key (a copy: a mapped file may be gone when they are read) */
    Py_ssize_t len;
    uint64_t hash;
    Sig sig;
    Py_ssize_t present; /* rows with a non-null value */
    Py_ssize_t last;    /* the record that last held it (a key held twice) */
} Column;

typedef struct {
    int32_t column;
    Sig sig;
} Member;

typedef struct {
    Column *cols;
    Py_ssize_t ncols, colcap;
    int32_t *slots; /* open addressing: column + 1, 0 empty */
    size_t nslots;
    unsigned char *keys; /* the columns' names, one after the other */
    Py_ssize_t nkeys, keycap;
    Member *members; /* the current record's */
    Py_ssize_t nmembers, memcap;
    int32_t at[POS_CACHE][2]; /* the columns of the last two different keys seen at each position */
} Table;

static uint64_t hash_key(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static int grow_slots(Table *t) {
    size_t n = t->nslots ? t->nslots * 2 : 64;
    int32_t *slots = calloc(n, sizeof(int32_t));
    if (!slots) return 0;
    for (Py_ssize_t c = 0; c < t->ncols; c++) {
        size_t i = t->cols[c].hash & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = (int32_t)(c + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return 1;
}

/* a == b for n bytes: keys are short, and a call to memcmp cost more than comparing them here */
static inline int same_key(const unsigned char *a, const unsigned char *b, Py_ssize_t n) {
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    while (n-- > 0)
        if (*a++ != *b++) return 0;
    return 1;
}

/* The column of this key, added (with no signature yet) if new; -1 when out of memory. */
static int32_t column_of(Table *t, const unsigned char *key, Py_ssize_t len, Py_ssize_t position) {
    if (position < POS_CACHE) { /* records of one shape, or of two alternating ones, find their keys here */
        for (int w = 0; w < 2; w++) {
            int32_t c = t->at[position][w];
            if (c >= 0 && t->cols[c].len == len && same_key(t->keys + t->cols[c].key, key, len)) return c;
        }
    }
    uint64_t h = hash_key(key, len);
    if ((size_t)(t->ncols + 1) * 2 > t->nslots && !grow_slots(t)) return -1;
    size_t i = h & (t->nslots - 1);
    int32_t c;
    while ((c = t->slots[i])) {
        Column *col = &t->cols[c - 1];
        if (col->hash == h && col->len == len && memcmp(t->keys + col->key, key, (size_t)len) == 0) break;
        i = (i + 1) & (t->nslots - 1);
    }
    if (c) {
        c -= 1;
    } else {
        if (t->ncols == INT32_MAX - 1) return -1;
        if (t->ncols == t->colcap) {
            Py_ssize_t cap = t->colcap ? t->colcap * 2 : 16;
            Column *cols = realloc(t->cols, (size_t)cap * sizeof(Column));
            if (!cols) return -1;
            t->cols = cols;
            t->colcap = cap;
        }
        c = (int32_t)t->ncols++;
        if (t->nkeys + len > t->keycap) {
            Py_ssize_t cap = t->keycap ? t->keycap : 256;
            while (cap < t->nkeys + len) cap *= 2;
            unsigned char *keys = realloc(t->keys, (size_t)cap);
            if (!keys) return -1;
            t->keys = keys;
            t->keycap = cap;
        }
        memcpy(t->keys + t->nkeys, key, (size_t)len);
        Column col = {t->nkeys, len, h, SIG_NULL, 0, -1};
        t->nkeys += len;
        t->cols[c] = col;
        t->slots[i] = c + 1;
    }
    if (position < POS_CACHE) {
        t->at[position][1] = t->at[position][0];
        t->at[position][0] = c;
    }
    return c;
}

enum { REC_OK, REC_UNSURE, REC_NOMEM };

/* One object record at s->p (its '{'), number k: members into t->members. */
static int object_record(Scan *s, Table *t, Py_ssize_t k) {
    t->nmembers = 0;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return REC_OK;
    }
    for (Py_ssize_t position = 0;; position++) {
        if (s->p >= s->end || *s->p != '"') return REC_UNSURE;
        const unsigned char *key = ++s->p;
        int escaped = 0;
        if (!scan_string(s, &escaped) || escaped) return REC_UNSURE;
        int32_t c = column_of(t, key, s->p - 1 - key, position);
        if (c < 0) return REC_NOMEM;
        if (t->cols[c].last == k) return REC_UNSURE; /* a key held twice */
        t->cols[c].last = k;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return REC_UNSURE;
        s->p++;
        skip_ws(s);
        int ok = 1;
        Sig sig = value_sig(s, 1, &ok);
        if (!ok) return REC_UNSURE;
        if (t->nmembers == t->memcap) {
            Py_ssize_t cap = t->memcap ? t->memcap * 2 : 16;
            Member *members = realloc(t->members, (size_t)cap * sizeof(Member));
            if (!members) return REC_NOMEM;
            t->members = members;
            t->memcap = cap;
        }
        Member m = {c, sig};
        t->members[t->nmembers++] = m;
        int next = next_or_close(s, '}');
        if (next == 2) return REC_OK;
        if (!next) return REC_UNSURE;
    }
}

typedef struct {
    Py_ssize_t stop, objects, committed;
    Sig whole;
    int nomem;
} Result;

static void scan_records(const unsigned char *data, const int64_t *bounds, Py_ssize_t lo, Py_ssize_t hi, Scan *s,
                         Table *t, Result *r) {
    r->objects = 0;
    r->committed = 0;
    r->whole = SIG_NULL;
    r->nomem = 0;
    Py_ssize_t k;
    for (k = lo; k < hi; k++) {
        s->p = data + bounds[k];
        s->end = data + bounds[k + 1];
        skip_ws(s);
        if (s->p >= s->end) break;
        if (*s->p == '{') {
            int got = object_record(s, t, k);
            if (got == REC_NOMEM) {
                r->nomem = 1;
                break;
            }
            skip_ws(s);
            if (got != REC_OK || s->p != s->end) break;
            for (Py_ssize_t m = 0; m < t->nmembers; m++) {
                Member mb = t->members[m];
                if (mb.sig.set) {
                    Column *col = &t->cols[mb.column];
                    col->present++;
                    col->sig = merge(col->sig, mb.sig);
                }
            }
            r->objects++;
            r->committed = t->ncols;
        } else {
            int ok = 1;
            Sig sig = value_sig(s, 0, &ok);
            skip_ws(s);
            if (!ok || s->p != s->end) break;
            r->whole = merge(r->whole, sig);
        }
    }
    r->stop = k;
}

/* ------------------------------------------------------------------------------------------ Python */
static PyObject *kind_names[K_JSON + 1];

static PyObject *sig_object(Sig sig) {
    if (!sig.set) Py_RETURN_NONE;
    PyObject *kind = sig.kind == K_NONE ? Py_None : kind_names[sig.kind];
    PyObject *ndim = sig.ndim < 0 ? Py_NewRef(Py_None) : PyLong_FromLong(sig.ndim);
    if (!ndim) return NULL;
    PyObject *pair = PyTuple_Pack(2, kind, ndim);
    Py_DECREF(ndim);
    return pair;
}

static PyObject *build(Table *t, Result *r) {
    PyObject *sigs = PyDict_New(), *present = PyDict_New(), *whole = NULL, *out = NULL;
    if (!sigs || !present) goto done;
    for (Py_ssize_t c = 0; c < r->committed; c++) {
        Column *col = &t->cols[c];
        PyObject *key = PyUnicode_DecodeUTF8((const char *)t->keys + col->key, col->len, "strict");
        PyObject *sig = key ? sig_object(col->sig) : NULL;
        PyObject *count = sig ? PyLong_FromSsize_t(col->present) : NULL;
        int failed = !count || PyDict_SetItem(sigs, key, sig) < 0 || PyDict_SetItem(present, key, count) < 0;
        Py_XDECREF(key);
        Py_XDECREF(sig);
        Py_XDECREF(count);
        if (failed) goto done;
    }
    whole = sig_object(r->whole);
    if (whole) out = Py_BuildValue("(nOOnO)", r->stop, sigs, present, r->objects, whole);
done:
    Py_XDECREF(sigs);
    Py_XDECREF(present);
    Py_XDECREF(whole);
    return out;
}

/* The records of one call, scanned from the bytes at p (n of them readable: the AVX2 loop reads ahead) —
   directly, or by the guarded map's run_in_place. */
typedef struct {
    const int64_t *bounds;
    Py_ssize_t lo, hi;
    Scan *s;
    Table *t;
    Result *r;
} Job;

static void scan_job(const unsigned char *p, Py_ssize_t n, void *arg) {
    Job *job = arg;
    job->s->limit = p + n;
    scan_records(p - job->bounds[job->lo], job->bounds, job->lo, job->hi, job->s, job->t, job->r);
}

static GuardedReadAPI *guarded = NULL; /* sjsonl.storage._guarded's: a GuardedMap is typed in place */

static PyObject *scan(PyObject *module, PyObject *args) {
    PyObject *source;
    Py_buffer data = {0}, bounds;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "Oy*nn", &source, &bounds, &lo, &hi)) return NULL;
    int mapped = guarded != NULL && Py_TYPE(source) == guarded->type;
    PyObject *out = NULL;
    Scan *s = NULL;
    Table t;
    memset(&t, 0, sizeof t);
    if (!mapped && PyObject_GetBuffer(source, &data, PyBUF_SIMPLE) < 0) goto done;
    if (bounds.len % 8) {
        PyErr_SetString(PyExc_ValueError, "bounds must be int64");
        goto done;
    }
    Py_ssize_t n = bounds.len / 8;
    const int64_t *b = (const int64_t *)bounds.buf;
    if (lo < 0 || hi < lo || hi >= n) {
        PyErr_Format(PyExc_IndexError, "records [%zd, %zd) are not all within %zd bounds", lo, hi, n);
        goto done;
    }
    for (Py_ssize_t k = lo; k < hi; k++) { /* (a map checks [b[lo], b[hi]) against its length itself) */
        if (b[k] < 0 || b[k] > b[k + 1] || (!mapped && b[k + 1] > data.len)) {
            PyErr_Format(PyExc_ValueError, "record %zd's bounds are outside the data", k);
            goto done;
        }
    }
    s = PyMem_RawMalloc(sizeof(Scan));
    if (!s) {
        PyErr_NoMemory();
        goto done;
    }
    for (int d = 0; d <= MAXD; d++) {
        s->len_at[d] = -1;
        s->child_at[d] = CH_UNSET;
    }
    s->touched = 0;
    for (int i = 0; i < POS_CACHE; i++) t.at[i][0] = t.at[i][1] = -1;
    Result r;
    Job job = {b, lo, hi, s, &t, &r};
    if (mapped) {
        if (guarded->run_in_place(source, (Py_ssize_t)b[lo], (Py_ssize_t)b[hi], scan_job, &job) < 0) goto done;
    } else {
        Py_BEGIN_ALLOW_THREADS
        scan_job((const unsigned char *)data.buf + b[lo], data.len - (Py_ssize_t)b[lo], &job);
        Py_END_ALLOW_THREADS
    }
    if (r.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    out = build(&t, &r);
done:
    PyMem_RawFree(s);
    free(t.cols);
    free(t.slots);
    free(t.members);
    free(t.keys);
    if (data.obj) PyBuffer_Release(&data);
    PyBuffer_Release(&bounds);
    return out;
}

/* The widest way to read string bodies this CPU has. */
static int widest_way(void) {
#ifdef STRING_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return WAY_AVX512;
    if (__builtin_cpu_supports("avx2")) return WAY_AVX2;
#endif
    return WAY_SSE2;
}

/* For the tests, which run every way on the same records. */
static PyObject *string_way(PyObject *module, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    int asked = -1;
    for (int w = WAY_SSE2; w <= WAY_AVX512; w++)
        if (!strcmp(name, way_names[w])) asked = w;
    if (asked < 0) {
        PyErr_Format(PyExc_ValueError, "string_way: %R is not one of 'sse2', 'avx2', 'avx512'", arg);
        return NULL;
    }
    int widest = widest_way();
    way = asked < widest ? asked : widest;
    return PyUnicode_FromString(way_names[way]);
}

static PyMethodDef methods[] = {
    {"string_way", string_way, METH_O,
     "string_way(name) -> str: read string bodies the way named ('avx512', 'avx2' or 'sse2': the SSE2/scalar "
     "loop), or the widest the CPU has below it; the way now used. The widest the CPU has is the default."},
    {"scan", scan, METH_VARARGS,
     "scan(data, bounds, lo, hi) -> (stop, sigs, present, objects, whole): the schema of records lo..stop-1 "
     "(see the source's header). data: bytes-like, or a GuardedMap (read in place under its guard)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_types", "Column types of JSON Lines records in compiled code (see the source's header).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__types(void) {
    static const char *names[] = {NULL, "str", "int64", "float64", "bool", "json"};
    for (int k = K_STR; k <= K_JSON; k++) {
        kind_names[k] = PyUnicode_InternFromString(names[k]);
        if (!kind_names[k]) return NULL;
    }
    for (int c = 0x20; c < 0x80; c++) plain[c] = c != '"' && c != '\\';
    init_utf8();
    way = widest_way();
    guarded = (GuardedReadAPI *)PyCapsule_Import("sjsonl.storage._guarded._read_api", 0);
    if (!guarded) PyErr_Clear(); /* not built: maps are read by copies (fast_types.chunk_parts) */
    return PyModule_Create(&module);
}
