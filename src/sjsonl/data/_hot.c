/* ds[i] in one compiled step: index lookup, bounds, the slice of the data, one parse; and `for r in ds`
   with no Python frame per record.

   A profile of ds[i] on ~180-byte records (page-cached, random order; the note of issue #22): 1.18 µs per
   record, of which the slice of the data (mostly the cache miss on its page) is ~0.27 µs, the parse ~0.61 µs,
   and ~0.30 µs is Python: the method call, the type and range checks, attribute reads, two offsets read
   from a memoryview. This moves that last part into C.

   A `HotRecords` reads one memory-mapped file's records (`IndexedFile.hot_records`): `get(i)` and `iter()`
   share one step, `record()`, whose record that fails the fast parse goes to the file's own slow path (NaN,
   which json.loads reads; an error to locate), exactly as the Python path does. A projection gives its
   parse as three calls (`FieldProjection.steps`: struct decode, `check` of the skipped bytes' UTF-8,
   `convert` to a dict); a record whose check is false, or whose conversion raised, takes the slow path.

   `Lookup` is the base type of `sjsonl.JSONLDataset`. Its `[]` (mp_subscript) serves a plain int key in
   range when the dataset's `_hot` attribute holds a `HotRecords` — set by the dataset for one file read
   whole, with no view, transform or projection (`JSONLDataset._hot_state`) — and calls the dataset's Python
   `_getitem` for everything else: other keys, an index out of range (its error names the dataset), another
   storage. A record served here is exactly what the Python path returns: the same slice of the same bytes,
   parsed by the same decoder. The dataset clears `_hot` whenever it changes what it reads (refresh, a
   view, a pickle), so a stale `HotRecords` is never consulted.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../storage/_guarded_api.h"

/* The guarded map's C slice (read_range): NULL where it is not built. */
static GuardedReadAPI *guarded = NULL;

typedef struct {
    PyObject_HEAD
    PyObject *data;    /* sliced: data[start:end] -> bytes */
    PyObject *decode;  /* bytes -> record */
    PyObject *slow;    /* (start, end) -> record: one whose parse raised (NaN, or an error to locate) */
    PyObject *check;   /* optional: bytes -> bool, false sends the record to `slow` (skipped bytes' UTF-8) */
    PyObject *convert; /* optional: parsed value -> record (a projection's struct -> dict) */
    Py_buffer offsets; /* record starts, any unsigned or signed integer width */
    Py_ssize_t n;      /* records */
    long long end;     /* end of the last record */
    int width;         /* bytes per offset */
} HotRecords;

/* Collected by the cyclic GC: `slow` is a bound method of the file that holds this HotRecords (a cycle),
   and without tp_traverse that cycle — with the file's map, offsets and descriptor — would never be freed. */
static int HotRecords_traverse(HotRecords *self, visitproc visit, void *arg) {
    Py_VISIT(self->data);
    Py_VISIT(self->decode);
    Py_VISIT(self->slow);
    Py_VISIT(self->check);
    Py_VISIT(self->convert);
    /* not offsets.obj: the buffer is released in dealloc, so its exporter must stay alive (and uncleared)
       until then — an exporter the GC could clear (a memoryview) would be released twice */
    return 0;
}

static int HotRecords_clear(HotRecords *self) {
    Py_CLEAR(self->data);
    Py_CLEAR(self->decode);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->check);
    Py_CLEAR(self->convert);
    return 0;
}

static void HotRecords_dealloc(HotRecords *self) {
    PyObject_GC_UnTrack(self);
    HotRecords_clear(self);
    if (self->offsets.obj != NULL) PyBuffer_Release(&self->offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int HotRecords_init(HotRecords *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"data", "offsets", "end", "decode", "slow", "check", "convert", NULL};
    PyObject *data, *offsets, *decode, *slow, *check = Py_None, *convert = Py_None;
    long long end;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOLOO|OO", kwlist, &data, &offsets, &end, &decode, &slow,
                                     &check, &convert))
        return -1;
    if (self->offsets.obj != NULL) {
        PyErr_SetString(PyExc_TypeError, "HotRecords is initialised once");
        return -1;
    }
    if (!PyCallable_Check(decode) || !PyCallable_Check(slow) || (check != Py_None && !PyCallable_Check(check)) ||
        (convert != Py_None && !PyCallable_Check(convert))) {
        PyErr_SetString(PyExc_TypeError, "decode and slow must be callable, check and convert callable or None");
        return -1;
    }
    if (PyObject_GetBuffer(offsets, &self->offsets, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *format = self->offsets.format;
    if (format[0] == '@') format++;
    if (self->offsets.ndim != 1 || strlen(format) != 1 || strchr("BHILQbhilq", format[0]) == NULL ||
        (self->offsets.itemsize != 1 && self->offsets.itemsize != 2 && self->offsets.itemsize != 4 &&
         self->offsets.itemsize != 8)) {
        PyBuffer_Release(&self->offsets);
        PyErr_SetString(PyExc_TypeError, "offsets must be a 1-D buffer of native integers");
        return -1;
    }
    self->width = (int)self->offsets.itemsize;
    self->n = self->offsets.len / self->offsets.itemsize;
    self->end = end;
    Py_INCREF(data);
    Py_XSETREF(self->data, data);
    Py_INCREF(decode);
    Py_XSETREF(self->decode, decode);
    Py_INCREF(slow);
    Py_XSETREF(self->slow, slow);
    Py_XSETREF(self->check, check == Py_None ? NULL : Py_NewRef(check));
    Py_XSETREF(self->convert, convert == Py_None ? NULL : Py_NewRef(convert));
    return 0;
}

static inline long long offset_at(HotRecords *self, Py_ssize_t i) {
    const char *p = (const char *)self->offsets.buf + i * self->width;
    switch (self->width) {
    case 1: return *(const uint8_t *)p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; } /* offsets are below 2**63 either way */
    }
}

/* data[start:stop]: the guarded map's own C slice (no ints, no slice object), else a Python slice. */
static PyObject *slice_of(HotRecords *self, long long start, long long stop) {
    if (guarded != NULL && Py_IS_TYPE(self->data, guarded->type))
        return guarded->read_range(self->data, (Py_ssize_t)start, (Py_ssize_t)stop);
    PyObject *lo = PyLong_FromLongLong(start);
    PyObject *hi = lo == NULL ? NULL : PyLong_FromLongLong(stop);
    PyObject *slice = hi == NULL ? NULL : PySlice_New(lo, hi, NULL);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    if (slice == NULL) return NULL;
    PyObject *raw = PyObject_GetItem(self->data, slice);
    Py_DECREF(slice);
    return raw;
}

/* 1 if check(raw) is true; else 0 with an exception set — its own, or a ValueError for a false answer. */
static int passes(PyObject *check, PyObject *raw) {
    PyObject *ok = PyObject_CallOneArg(check, raw);
    int truth = ok == NULL ? -1 : PyObject_IsTrue(ok);
    Py_XDECREF(ok);
    if (truth == 0) PyErr_SetString(PyExc_ValueError, "the record failed its check");
    return truth > 0;
}

/* Record i (0 <= i < n), or NULL with an exception set. A record whose parse, check or conversion raised an
   Exception (or whose check was false) goes to slow(start, end): NaN, which json.loads reads; skipped bytes
   that are not UTF-8; an error to locate. An error of the read itself (a changed file) is raised as it is —
   the map checks the file's version at most every 0.1 s, so a read again might not see it. */
static PyObject *record(HotRecords *self, Py_ssize_t i) {
    if (self->data == NULL) { /* never initialised, or cleared by the GC */
        PyErr_SetString(PyExc_ValueError, "HotRecords has nothing to read");
        return NULL;
    }
    long long start = offset_at(self, i);
    long long stop = i + 1 < self->n ? offset_at(self, i + 1) : self->end;
    PyObject *raw = slice_of(self, start, stop);
    if (raw == NULL) return NULL;
    PyObject *value = PyObject_CallOneArg(self->decode, raw);
    if (value != NULL && self->check != NULL && !passes(self->check, raw)) Py_CLEAR(value);
    Py_DECREF(raw);
    if (value != NULL && self->convert != NULL) Py_SETREF(value, PyObject_CallOneArg(self->convert, value));
    if (value != NULL || !PyErr_ExceptionMatches(PyExc_Exception)) return value;
    PyErr_Clear();
    return PyObject_CallFunction(self->slow, "LL", start, stop);
}

static PyObject *HotRecords_get(HotRecords *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) i += self->n;
    if (i < 0 || i >= self->n) {
        PyErr_SetString(PyExc_IndexError, "record number out of range");
        return NULL;
    }
    return record(self, i);
}

static Py_ssize_t HotRecords_len(HotRecords *self) { return self->n; }

/* Records lo..hi in file order, one slice and one parse each, no Python frame per record. A record whose
   parse raised is handed to the HotRecords' slow path (NaN; a located error); check() runs before every block of
   CHECK_EVERY records, as the Python block path checks the file once per block. */
#define CHECK_EVERY 8192

typedef struct {
    PyObject_HEAD
    HotRecords *hot;
    PyObject *check;
    Py_ssize_t pos, hi, next_check;
} RecordIter;

static int RecordIter_traverse(RecordIter *self, visitproc visit, void *arg) {
    Py_VISIT(self->hot);
    Py_VISIT(self->check);
    return 0;
}

static int RecordIter_clear(RecordIter *self) {
    Py_CLEAR(self->hot);
    Py_CLEAR(self->check);
    return 0;
}

static void RecordIter_dealloc(RecordIter *self) {
    PyObject_GC_UnTrack(self);
    RecordIter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *RecordIter_next(RecordIter *self) {
    if (self->pos >= self->hi || self->hot == NULL) return NULL;
    if (self->pos >= self->next_check) {
        self->next_check = self->pos + CHECK_EVERY;
        if (self->check != Py_None) {
            PyObject *ok = PyObject_CallNoArgs(self->check);
            if (ok == NULL) return NULL;
            Py_DECREF(ok);
        }
    }
    return record(self->hot, self->pos++);
}

static PyTypeObject RecordIterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sjsonl.data._hot.RecordIter",
    .tp_basicsize = sizeof(RecordIter),
    .tp_dealloc = (destructor)RecordIter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)RecordIter_traverse,
    .tp_clear = (inquiry)RecordIter_clear,
    .tp_doc = "Records of a HotRecords in file order (HotRecords.iter).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)RecordIter_next,
};

static PyObject *HotRecords_iter(HotRecords *self, PyObject *args) {
    Py_ssize_t lo, hi;
    PyObject *check;
    if (!PyArg_ParseTuple(args, "nnO", &lo, &hi, &check)) return NULL;
    if (lo < 0 || hi > self->n || lo > hi) {
        PyErr_SetString(PyExc_IndexError, "record range out of range");
        return NULL;
    }
    if (check != Py_None && !PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "check must be callable or None");
        return NULL;
    }
    RecordIter *it = PyObject_GC_New(RecordIter, &RecordIterType);
    if (it == NULL) return NULL;
    Py_INCREF(self);
    it->hot = self;
    Py_INCREF(check);
    it->check = check;
    it->pos = lo;
    it->hi = hi;
    it->next_check = lo;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyMethodDef HotRecords_methods[] = {
    {"get", (PyCFunction)HotRecords_get, METH_O, "get(i) -> record i (negative counts from the end)"},
    {"iter", (PyCFunction)HotRecords_iter, METH_VARARGS,
     "iter(lo, hi, check) -> records lo..hi in order, as get(); check() runs before every block of 8192"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods HotRecords_as_sequence = {.sq_length = (lenfunc)HotRecords_len};

static PyTypeObject HotRecordsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sjsonl.data._hot.HotRecords",
    .tp_basicsize = sizeof(HotRecords),
    .tp_dealloc = (destructor)HotRecords_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)HotRecords_traverse,
    .tp_clear = (inquiry)HotRecords_clear,
    .tp_doc = "HotRecords(data, offsets, end, decode, slow, check=None, convert=None): records of one file, read "
              "by number in C.",
    .tp_methods = HotRecords_methods,
    .tp_as_sequence = &HotRecords_as_sequence,
    .tp_init = (initproc)HotRecords_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *s_hot, *s_getitem;

static PyObject *Lookup_subscript(PyObject *self, PyObject *key) {
    if (PyLong_CheckExact(key)) {
        PyObject *dict = PyObject_GenericGetDict(self, NULL);
        if (dict == NULL) return NULL;
        PyObject *hot = PyDict_GetItemWithError(dict, s_hot); /* borrowed */
        Py_XINCREF(hot);
        Py_DECREF(dict);
        if (hot == NULL && PyErr_Occurred()) return NULL;
        if (hot != NULL && Py_IS_TYPE(hot, &HotRecordsType)) {
            HotRecords *h = (HotRecords *)hot;
            int overflow;
            long long i = PyLong_AsLongLongAndOverflow(key, &overflow);
            if (!overflow && i < 0) i += h->n;
            if (!overflow && i >= 0 && i < h->n) {
                PyObject *value = record(h, (Py_ssize_t)i);
                Py_DECREF(hot);
                return value;
            }
            Py_DECREF(hot);
        } else {
            Py_XDECREF(hot);
        }
    }
    return PyObject_CallMethodOneArg(self, s_getitem, key);
}

static PyMappingMethods Lookup_as_mapping = {.mp_subscript = Lookup_subscript};

static PyTypeObject LookupType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sjsonl.data._hot.Lookup",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Base of JSONLDataset: ds[i] through its HotRecords, else self._getitem(key).",
    .tp_as_mapping = &Lookup_as_mapping,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hot", "ds[i] in one compiled step (see the source's header).", -1, NULL,
};

PyMODINIT_FUNC PyInit__hot(void) {
    if (PyType_Ready(&HotRecordsType) < 0 || PyType_Ready(&LookupType) < 0 || PyType_Ready(&RecordIterType) < 0)
        return NULL;
    s_hot = PyUnicode_InternFromString("_hot");
    s_getitem = PyUnicode_InternFromString("_getitem");
    if (s_hot == NULL || s_getitem == NULL) return NULL;
    guarded = (GuardedReadAPI *)PyCapsule_Import("sjsonl.storage._guarded._read_api", 0);
    if (guarded == NULL) PyErr_Clear(); /* not built: slices go through PyObject_GetItem */
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&HotRecordsType);
    Py_INCREF(&LookupType);
    if (PyModule_AddObject(m, "HotRecords", (PyObject *)&HotRecordsType) < 0 ||
        PyModule_AddObject(m, "Lookup", (PyObject *)&LookupType) < 0)
        return NULL;
    return m;
}
