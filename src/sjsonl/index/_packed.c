/* Random access into a compact index (sjsonl.index.packed), compiled: the offset of record i in O(1)
 * without decoding the rest, for the hot path of ds[i].
 *
 * The encoding (documented in packed.py): records in blocks of 2**log2_block; each block has a 16-byte
 * header {uint64 base; uint64 info} (little-endian) — base is the offset of its first record, info packs
 * the bit position of its residuals (bits 0-39), their width w (bits 40-45) and the block's smallest
 * gap `min` (bits 46-63). Record k > 0 of a block starts at base + k*min + (the sum of the block's first
 * k residuals), each residual w bits wide, LSB first.
 *
 *   PackedView(buffer, records, log2_block, blocks_at, packed_at, packed_bytes)
 *   view[i] -> int                       offset of record i (negative i counts from the end)
 *   len(view)
 *   view.span(i, end) -> (start, stop)   stop is the next record's offset, or `end` for the last one
 *   view.decode(lo, hi, out)             offsets lo..hi-1 into out (a writable uint64 buffer)
 *   view.gather(indices, out)            offsets at int64 `indices` into out (uint64)
 *
 * and the encoder, byte for byte what packed_codec.encode writes with numpy:
 *
 *   plan(offsets, log2_block, headers) -> bits     every block header (base, bit position, width, min
 *                                                  gap) into headers (uint64, 2 a block); ValueError if
 *                                                  the offsets do not strictly increase or do not fit
 *   pack(offsets, log2_block, headers, packed)     the residuals into packed (uint8, zeroed, with the
 *                                                  8 bytes of padding)
 *
 * Every read is checked against the buffer (a width over 56 bits or residuals past the end raise
 * ValueError), so even an index whose checks were deferred can never read outside its map. Built by
 * setup.py as an optional extension: without it packed.py decodes with numpy, to the same offsets
 * (tests/test_compact_index.py checks both).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    Py_buffer buf;
    int has_buf;
    const unsigned char *blocks;
    const unsigned char *packed;
    uint64_t nbits; /* bits of residuals that may be read (the 8 padding bytes excluded) */
    Py_ssize_t n;
    int shift;
    Py_ssize_t mask;
} PackedView;

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if !PY_LITTLE_ENDIAN
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define POS_MASK ((1ULL << 40) - 1)
#define MAX_MIN ((1ULL << 18) - 1)

static void corrupt(void) { PyErr_SetString(PyExc_ValueError, "compact index is corrupt (a block header)"); }

/* The offset of record i (0 <= i < n); -1 with ValueError set on a corrupt block. */
static int offset_at(const PackedView *v, Py_ssize_t i, uint64_t *out) {
    const unsigned char *h = v->blocks + ((size_t)(i >> v->shift) << 4);
    uint64_t base = load64(h);
    uint64_t k = (uint64_t)(i & v->mask);
    if (k == 0) {
        *out = base;
        return 0;
    }
    uint64_t info = load64(h + 8);
    uint64_t pos = info & POS_MASK, min = info >> 46;
    unsigned w = (unsigned)((info >> 40) & 63);
    if (w > 56 || pos + k * w > v->nbits) return -1;
    uint64_t acc = 0;
    if (w) {
        const uint64_t m = (1ULL << w) - 1;
        const unsigned char *p = v->packed;
        for (uint64_t j = 0; j < k; j++, pos += w) acc += (load64(p + (pos >> 3)) >> (pos & 7)) & m;
    }
    *out = base + k * min + acc;
    return 0;
}

/* Offsets lo..hi-1 into out, one pass per block (no per-record prefix sums). */
static int decode_range(const PackedView *v, Py_ssize_t lo, Py_ssize_t hi, uint64_t *out) {
    Py_ssize_t i = lo;
    while (i < hi) {
        uint64_t cur;
        if (offset_at(v, i, &cur) < 0) return -1;
        Py_ssize_t block_end = ((i >> v->shift) + 1) << v->shift;
        if (block_end > hi) block_end = hi;
        *out++ = cur;
        i++;
        if (i >= block_end) continue;
        const unsigned char *h = v->blocks + ((size_t)(i >> v->shift) << 4);
        uint64_t info = load64(h + 8);
        uint64_t min = info >> 46, k = (uint64_t)((i - 1) & v->mask);
        unsigned w = (unsigned)((info >> 40) & 63);
        uint64_t pos = (info & POS_MASK) + k * w;
        if (w > 56 || pos + (uint64_t)(block_end - i) * w > v->nbits) return -1;
        const uint64_t m = w ? (1ULL << w) - 1 : 0;
        for (; i < block_end; i++, pos += w) {
            cur += min + (w ? (load64(v->packed + (pos >> 3)) >> (pos & 7)) & m : 0);
            *out++ = cur;
        }
    }
    return 0;
}

static int get_out(PyObject *target, Py_buffer *out, Py_ssize_t need) {
    if (PyObject_GetBuffer(target, out, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *fmt = (out->format && *out->format) ? out->format : "B";
    char kind = fmt[strlen(fmt) - 1];
    int native_order = PY_LITTLE_ENDIAN ? (fmt[0] != '>' && fmt[0] != '!') : (fmt[0] != '<');
    if (out->itemsize != 8 || !(kind == 'Q' || kind == 'L') || !native_order) {
        PyBuffer_Release(out);
        PyErr_SetString(PyExc_TypeError, "out must be a native-order uint64 array");
        return -1;
    }
    if (out->len / 8 < need) {
        PyBuffer_Release(out);
        PyErr_SetString(PyExc_ValueError, "out is too small");
        return -1;
    }
    return 0;
}

static int view_init(PackedView *self, PyObject *args, PyObject *kwds) {
    PyObject *source;
    Py_ssize_t n, blocks_at, packed_at, packed_bytes;
    int log2_block;
    if (!PyArg_ParseTuple(args, "Oninnn", &source, &n, &log2_block, &blocks_at, &packed_at, &packed_bytes))
        return -1;
    if (self->has_buf) {
        PyBuffer_Release(&self->buf);
        self->has_buf = 0;
    }
    if (PyObject_GetBuffer(source, &self->buf, PyBUF_SIMPLE) < 0) return -1;
    self->has_buf = 1;
    Py_ssize_t blocks = n > 0 ? ((n - 1) >> (log2_block > 0 ? log2_block : 0)) + 1 : 0;
    if (n < 0 || log2_block < 1 || log2_block > 16 || blocks_at < 0 || packed_bytes < 8 ||
        blocks_at > self->buf.len || blocks > (self->buf.len - blocks_at) / 16 ||
        packed_at < blocks_at + blocks * 16 || packed_at > self->buf.len ||
        packed_bytes > self->buf.len - packed_at) {
        PyErr_SetString(PyExc_ValueError, "compact index layout does not fit its buffer");
        return -1;
    }
    const unsigned char *base = (const unsigned char *)self->buf.buf;
    self->blocks = base + blocks_at;
    self->packed = base + packed_at;
    self->nbits = (uint64_t)(packed_bytes - 8) * 8;
    self->n = n;
    self->shift = log2_block;
    self->mask = ((Py_ssize_t)1 << log2_block) - 1;
    return 0;
}

static void view_dealloc(PackedView *self) {
    if (self->has_buf) PyBuffer_Release(&self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t view_len(PackedView *self) { return self->n; }

static PyObject *view_item(PackedView *self, Py_ssize_t i) {
    if (i < 0) i += self->n;
    if (i < 0 || i >= self->n) {
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return NULL;
    }
    uint64_t off;
    if (offset_at(self, i, &off) < 0) {
        corrupt();
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(off);
}

static PyObject *view_subscript(PackedView *self, PyObject *key) {
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    return view_item(self, i);
}

static PyObject *view_span(PackedView *self, PyObject *args) {
    Py_ssize_t i;
    unsigned long long end;
    if (!PyArg_ParseTuple(args, "nK", &i, &end)) return NULL;
    if (i < 0 || i >= self->n) {
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return NULL;
    }
    uint64_t pair[2] = {0, end};
    if (decode_range(self, i, i + 1 < self->n ? i + 2 : i + 1, pair) < 0) {
        corrupt();
        return NULL;
    }
    return Py_BuildValue("KK", (unsigned long long)pair[0], (unsigned long long)pair[1]);
}

static PyObject *view_decode(PackedView *self, PyObject *args) {
    Py_ssize_t lo, hi;
    PyObject *target;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "nnO", &lo, &hi, &target)) return NULL;
    if (lo < 0 || hi > self->n || lo > hi) {
        PyErr_SetString(PyExc_IndexError, "range out of bounds");
        return NULL;
    }
    if (get_out(target, &out, hi - lo) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_range(self, lo, hi, (uint64_t *)out.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    if (rc < 0) {
        corrupt();
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *view_gather(PackedView *self, PyObject *args) {
    Py_buffer idx, out;
    PyObject *target;
    if (!PyArg_ParseTuple(args, "y*O", &idx, &target)) return NULL;
    if (idx.len % 8) {
        PyBuffer_Release(&idx);
        PyErr_SetString(PyExc_TypeError, "indices must be int64");
        return NULL;
    }
    Py_ssize_t m = idx.len / 8;
    if (get_out(target, &out, m) < 0) {
        PyBuffer_Release(&idx);
        return NULL;
    }
    const int64_t *ix = (const int64_t *)idx.buf;
    uint64_t *dst = (uint64_t *)out.buf;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < m; k++) {
        int64_t i = ix[k];
        if (i < 0) i += self->n;
        if (i < 0 || i >= self->n) { rc = -2; break; }
        if (offset_at(self, (Py_ssize_t)i, &dst[k]) < 0) { rc = -1; break; }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&idx);
    PyBuffer_Release(&out);
    if (rc == -2) {
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return NULL;
    }
    if (rc < 0) {
        corrupt();
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- the encoder */

typedef struct {
    const unsigned char *p;
    int size;
    Py_ssize_t n;
} Offsets;

static inline uint64_t offset_of(const Offsets *o, Py_ssize_t i) {
    switch (o->size) {
    case 1: return o->p[i];
    case 2: { uint16_t v; memcpy(&v, o->p + 2 * i, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, o->p + 4 * i, 4); return v; }
    default: { uint64_t v; memcpy(&v, o->p + 8 * i, 8); return v; }
    }
}

/* A native-order unsigned integer array (offsets) or a uint64/uint8 one to write into (out_size). */
static int get_array(PyObject *obj, Py_buffer *b, int writable, int want_size) {
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, b, flags) < 0) return -1;
    const char *fmt = (b->format && *b->format) ? b->format : "B";
    char kind = fmt[strlen(fmt) - 1];
    int native_order = PY_LITTLE_ENDIAN ? (fmt[0] != '>' && fmt[0] != '!') : (fmt[0] != '<');
    int size = (int)b->itemsize;
    int ok = native_order && strchr("BHILQ", kind) != NULL && (size == 1 || size == 2 || size == 4 || size == 8);
    if (!ok || (want_size && size != want_size)) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_TypeError, want_size == 8 ? "expected a native-order uint64 array"
                        : want_size == 1 ? "expected a uint8 array" : "offsets must be native-order unsigned integers");
        return -1;
    }
    return 0;
}

static inline unsigned bits_of(uint64_t v) { return v ? 64 - (unsigned)__builtin_clzll(v) : 0; }

static PyObject *mod_plan(PyObject *self, PyObject *args) {
    PyObject *src, *dst;
    int log2_block;
    Py_buffer ob, hb;
    if (!PyArg_ParseTuple(args, "OiO", &src, &log2_block, &dst)) return NULL;
    if (log2_block < 1 || log2_block > 16) {
        PyErr_SetString(PyExc_ValueError, "log2_block must be 1..16");
        return NULL;
    }
    if (get_array(src, &ob, 0, 0) < 0) return NULL;
    if (get_array(dst, &hb, 1, 8) < 0) {
        PyBuffer_Release(&ob);
        return NULL;
    }
    Offsets o = {(const unsigned char *)ob.buf, (int)ob.itemsize, ob.len / ob.itemsize};
    Py_ssize_t block = (Py_ssize_t)1 << log2_block, blocks = o.n ? (o.n - 1) / block + 1 : 0;
    const char *why = NULL;
    uint64_t total = 0;
    if (hb.len / 16 < blocks) why = "headers is too small";
    if (!why && o.n && offset_of(&o, o.n - 1) >= (1ULL << 63)) why = "offsets beyond 2**63";
    uint64_t *hdr = (uint64_t *)hb.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < blocks && !why; b++) {
        Py_ssize_t lo = b * block, count = o.n - lo < block ? o.n - lo : block;
        uint64_t prev = offset_of(&o, lo), lowest = UINT64_MAX, highest = 0;
        if (b > 0 && prev <= offset_of(&o, lo - 1)) why = "offsets must strictly increase";
        for (Py_ssize_t j = 1; j < count && !why; j++) {
            uint64_t cur = offset_of(&o, lo + j);
            if (cur <= prev) why = "offsets must strictly increase";
            uint64_t gap = cur - prev;
            if (gap < lowest) lowest = gap;
            if (gap > highest) highest = gap;
            prev = cur;
        }
        if (why) break;
        uint64_t min = count > 1 ? (lowest < MAX_MIN ? lowest : MAX_MIN) : 1;
        unsigned w = count > 1 ? bits_of(highest - min) : 0;
        if (w > 56) { why = "a record is too large for a compact index"; break; }
        hdr[2 * b] = offset_of(&o, lo);
        hdr[2 * b + 1] = total | ((uint64_t)w << 40) | (min << 46);
        total += (uint64_t)(count - 1) * w;
        if (total >= (1ULL << 40)) why = "too many records for a compact index";
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ob);
    PyBuffer_Release(&hb);
    if (why) {
        PyErr_SetString(PyExc_ValueError, why);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(total);
}

static PyObject *mod_pack(PyObject *self, PyObject *args) {
    PyObject *src, *headers, *dst;
    int log2_block;
    Py_buffer ob, hb, pb;
    if (!PyArg_ParseTuple(args, "OiOO", &src, &log2_block, &headers, &dst)) return NULL;
    if (log2_block < 1 || log2_block > 16) {
        PyErr_SetString(PyExc_ValueError, "log2_block must be 1..16");
        return NULL;
    }
    if (get_array(src, &ob, 0, 0) < 0) return NULL;
    if (get_array(headers, &hb, 0, 8) < 0) {
        PyBuffer_Release(&ob);
        return NULL;
    }
    if (get_array(dst, &pb, 1, 1) < 0) {
        PyBuffer_Release(&ob);
        PyBuffer_Release(&hb);
        return NULL;
    }
    Offsets o = {(const unsigned char *)ob.buf, (int)ob.itemsize, ob.len / ob.itemsize};
    Py_ssize_t block = (Py_ssize_t)1 << log2_block, blocks = o.n ? (o.n - 1) / block + 1 : 0;
    const uint64_t *hdr = (const uint64_t *)hb.buf;
    unsigned char *out = (unsigned char *)pb.buf;
    uint64_t nbits = pb.len >= 8 ? (uint64_t)(pb.len - 8) * 8 : 0;
    int bad = hb.len / 16 < blocks;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < blocks && !bad; b++) {
        Py_ssize_t lo = b * block, count = o.n - lo < block ? o.n - lo : block;
        uint64_t info = hdr[2 * b + 1], pos = info & POS_MASK, min = info >> 46;
        unsigned w = (unsigned)((info >> 40) & 63);
        if (w > 56 || pos + (uint64_t)(count - 1) * w > nbits) { bad = 1; break; }
        if (w == 0) continue;
        uint64_t prev = offset_of(&o, lo);
        for (Py_ssize_t j = 1; j < count; j++, pos += w) {
            uint64_t cur = offset_of(&o, lo + j), word;
            memcpy(&word, out + (pos >> 3), 8);
#if !PY_LITTLE_ENDIAN
            word = __builtin_bswap64(word);
#endif
            word |= (cur - prev - min) << (pos & 7);
#if !PY_LITTLE_ENDIAN
            word = __builtin_bswap64(word);
#endif
            memcpy(out + (pos >> 3), &word, 8);
            prev = cur;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ob);
    PyBuffer_Release(&hb);
    PyBuffer_Release(&pb);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "headers do not fit these offsets and this output");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"plan", mod_plan, METH_VARARGS, "plan(offsets, log2_block, headers) -> bits of residuals"},
    {"pack", mod_pack, METH_VARARGS, "pack(offsets, log2_block, headers, packed): write the residuals"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef view_methods[] = {
    {"span", (PyCFunction)view_span, METH_VARARGS, "span(i, end) -> (start, stop) of record i"},
    {"decode", (PyCFunction)view_decode, METH_VARARGS, "decode(lo, hi, out): offsets lo..hi-1 into out"},
    {"gather", (PyCFunction)view_gather, METH_VARARGS, "gather(indices, out): offsets at int64 indices"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods view_as_mapping = {(lenfunc)view_len, (binaryfunc)view_subscript, NULL};
static PySequenceMethods view_as_sequence = {(lenfunc)view_len, 0, 0, (ssizeargfunc)view_item};

static PyTypeObject PackedViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sjsonl.index._packed.PackedView",
    .tp_basicsize = sizeof(PackedView),
    .tp_dealloc = (destructor)view_dealloc,
    .tp_as_sequence = &view_as_sequence,
    .tp_as_mapping = &view_as_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Offsets of a compact index, decoded one at a time: view[i] is record i's start.",
    .tp_methods = view_methods,
    .tp_init = (initproc)view_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_packed", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__packed(void) {
    if (PyType_Ready(&PackedViewType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PackedViewType);
    if (PyModule_AddObject(m, "PackedView", (PyObject *)&PackedViewType) < 0) {
        Py_DECREF(&PackedViewType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
