/* Memory-mapped reads that fail with an error, never with a signal.
 *
 * A file truncated (or rewritten shorter) in place while it is mapped leaves pages with no bytes behind
 * them; touching one raises SIGBUS, which kills a Python process (`python gen.py > train.jsonl` under a
 * running job does exactly this). GuardedMap maps the file itself and copies every slice under a guard: a
 * thread-local sigjmp_buf armed only for the memcpy, and a SIGBUS handler that jumps back to it. The copy
 * then raises a Python exception instead (after calling `check`, which names what changed in the file).
 * A SIGBUS outside a guarded copy goes to the handler that was there before (by default the process dies,
 * as it would have without this module). This is what the JVM does for MappedByteBuffer.
 *
 *   GuardedMap(fd, length, check, interval_s)   read-only shared map of fd's first `length` bytes
 *       m[a:b] -> bytes       the bytes, copied under the guard (step 1 only); m[i] -> int
 *       len(m)
 *       m.count_newlines(a, b) -> int    b'\n' in [a, b), under the guard
 *       m.check()             calls `check` now
 *   The capsule `_read_api` (a `GuardedReadAPI`, _guarded_api.h) lets other extensions take `m[a:b]` with
 *   no slice object (`sjsonl.data._hot`), or run a reader on the mapped bytes in place, under the guard
 *   (`sjsonl.records._types`).
 *   `check` is a callable that raises when the file no longer holds the mapped version; slicing calls it
 *   at most every `interval_s` seconds (a monotonic coarse clock is read on each slice, a few ns), so a
 *   change in place that keeps the file's size is noticed within that interval.
 *
 * FileMap(fd, length) is a plain read-only map with the buffer protocol (numpy views it in place), for
 * index files: unlike Python's mmap object it keeps no duplicate of the descriptor, so a thousand mapped
 * indexes do not hold a thousand descriptors open.
 *
 * Built by setup.py as an optional extension; without it, sjsonl reads local files with pread instead.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "_guarded_api.h"

/* non-NULL while this thread copies from a map; initial-exec: no lazy allocation inside the handler */
static __thread sigjmp_buf *volatile armed __attribute__((tls_model("initial-exec"))) = NULL;
static struct sigaction previous_bus;
static volatile sig_atomic_t passed_on = 0; /* unguarded faults handed to the previous handler */

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *env = armed;
    if (env != NULL) {
        armed = NULL;
        siglongjmp(*env, 1); /* SA_NODEFER: the signal is not left blocked after the jump */
    }
    /* Not a guarded copy: put the previous handler back and return; the faulting instruction runs again
     * and faults under it (the default action ends the process, as without this module). Should the fault
     * come back here — two handlers that each hand it to the other (ours re-installed over one that
     * chains to us) — the default action ends it, so a fault never loops. */
    if (passed_on++ == 0) {
        sigaction(SIGBUS, &previous_bus, NULL);
    } else {
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        sigaction(SIGBUS, &fallback, NULL);
    }
    (void)sig;
    (void)info;
    (void)context;
}

/* Make on_sigbus the SIGBUS handler if it is not (any more): a library may install its own after ours —
 * MindSpore does when a pipeline starts, a handler that ends the process — and a guarded copy must still
 * reach ours. The handler found becomes the previous one, to which unguarded faults go. Called for every
 * new map and at every version check (at most every `interval_s` of reading), so a map made before
 * another handler took over is guarded again within that interval: one sigaction(2) each time. */
static int install_handler(void) {
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus) return 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &previous_bus) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    passed_on = 0; /* a new chain: its first unguarded fault goes to the handler found */
    return 0;
}

/* Copy n bytes from src to dst; 0 on success, -1 if a page could not be read (SIGBUS). */
static int guarded_copy(char *dst, const char *src, size_t n) {
    sigjmp_buf env;
    if (sigsetjmp(env, 0) != 0) return -1;
    armed = &env;
    atomic_signal_fence(memory_order_seq_cst); /* the copy may not move out from under the guard */
    memcpy(dst, src, n);
    atomic_signal_fence(memory_order_seq_cst);
    armed = NULL;
    return 0;
}

/* reader(p, n, arg) under the guard; 0, or -1 if a page could not be read (SIGBUS). */
static int guarded_run(GuardedReader reader, const unsigned char *p, Py_ssize_t n, void *arg) {
    sigjmp_buf env;
    if (sigsetjmp(env, 0) != 0) return -1;
    armed = &env;
    atomic_signal_fence(memory_order_seq_cst);
    reader(p, n, arg);
    atomic_signal_fence(memory_order_seq_cst);
    armed = NULL;
    return 0;
}

static Py_ssize_t guarded_count(const char *p, Py_ssize_t n) {
    sigjmp_buf env;
    volatile Py_ssize_t count = 0;
    if (sigsetjmp(env, 0) != 0) return -1;
    armed = &env;
    atomic_signal_fence(memory_order_seq_cst);
    const char *end = p + n;
    while (p < end) {
        const char *hit = memchr(p, '\n', (size_t)(end - p));
        if (hit == NULL) break;
        count++;
        p = hit + 1;
    }
    atomic_signal_fence(memory_order_seq_cst);
    armed = NULL;
    return count;
}

typedef struct {
    PyObject_HEAD char *base;
    Py_ssize_t length;
    PyObject *check;
    int64_t interval_ns;
    int64_t next_check_ns;
} GuardedMap;

static int64_t coarse_now_ns(void) {
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int run_check(GuardedMap *self) {
    if (self->check == Py_None) return 0;
    PyObject *r = PyObject_CallNoArgs(self->check);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static int maybe_check(GuardedMap *self) {
    if (self->interval_ns < 0) return 0;
    int64_t now = coarse_now_ns();
    if (now < self->next_check_ns) return 0;
    self->next_check_ns = now + self->interval_ns;
    if (install_handler() < 0) return -1;
    return run_check(self);
}

/* After a fault: the check names the change (truncated, rewritten); if it finds none, an I/O error. */
static void *fault(GuardedMap *self, Py_ssize_t lo, Py_ssize_t hi) {
    if (run_check(self) < 0) return NULL;
    PyErr_Format(PyExc_OSError, "could not read bytes [%zd, %zd) of a memory-mapped data file (I/O error)", lo,
                 hi);
    return NULL;
}

static int GuardedMap_init(GuardedMap *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fd", "length", "check", "interval", NULL};
    int fd;
    Py_ssize_t length;
    PyObject *check = Py_None;
    double interval = -1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "in|Od", kwlist, &fd, &length, &check, &interval))
        return -1;
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "length must be >= 0");
        return -1;
    }
    if (check != Py_None && !PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "check must be callable or None");
        return -1;
    }
    if (install_handler() < 0) return -1;
    if (self->base != NULL) { /* __init__ called twice */
        munmap(self->base, (size_t)self->length);
        self->base = NULL;
    }
    if (length > 0) {
        void *p = mmap(NULL, (size_t)length, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        self->base = p;
    }
    self->length = length;
    Py_INCREF(check);
    Py_XSETREF(self->check, check);
    self->interval_ns = interval < 0 ? -1 : (int64_t)(interval * 1e9);
    self->next_check_ns = self->interval_ns < 0 ? 0 : coarse_now_ns() + self->interval_ns;
    return 0;
}

static void GuardedMap_dealloc(GuardedMap *self) {
    if (self->base != NULL) munmap(self->base, (size_t)self->length);
    Py_XDECREF(self->check);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t GuardedMap_length(GuardedMap *self) { return self->length; }

static PyObject *copy_range(GuardedMap *self, Py_ssize_t lo, Py_ssize_t hi) {
    Py_ssize_t n = hi > lo ? hi - lo : 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) return NULL;
    if (n > 0 && guarded_copy(PyBytes_AS_STRING(out), self->base + lo, (size_t)n) < 0) {
        Py_DECREF(out);
        return fault(self, lo, hi);
    }
    return out;
}

static PyObject *GuardedMap_subscript(GuardedMap *self, PyObject *key) {
    if (maybe_check(self) < 0) return NULL;
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
        if (step != 1) {
            PyErr_SetString(PyExc_ValueError, "GuardedMap slices take no step");
            return NULL;
        }
        PySlice_AdjustIndices(self->length, &start, &stop, step);
        return copy_range(self, start, stop);
    }
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) i += self->length;
    if (i < 0 || i >= self->length) {
        PyErr_SetString(PyExc_IndexError, "GuardedMap index out of range");
        return NULL;
    }
    unsigned char byte;
    if (guarded_copy((char *)&byte, self->base + i, 1) < 0) return fault(self, i, i + 1);
    return PyLong_FromLong(byte);
}

/* m[lo:hi] for C callers (the `_read_api` capsule): as GuardedMap_subscript with a slice of step 1. */
static PyObject *read_range(PyObject *map, Py_ssize_t lo, Py_ssize_t hi) {
    GuardedMap *self = (GuardedMap *)map;
    if (maybe_check(self) < 0) return NULL;
    PySlice_AdjustIndices(self->length, &lo, &hi, 1);
    return copy_range(self, lo, hi);
}

/* run_in_place for C callers (the `_read_api` capsule): see _guarded_api.h. */
static int run_in_place(PyObject *map, Py_ssize_t lo, Py_ssize_t hi, GuardedReader reader, void *arg) {
    GuardedMap *self = (GuardedMap *)map;
    if (maybe_check(self) < 0) return -1;
    if (lo < 0 || hi < lo || hi > self->length) {
        PyErr_Format(PyExc_IndexError, "bytes [%zd, %zd) are not all within the map of %zd", lo, hi, self->length);
        return -1;
    }
    int got;
    Py_BEGIN_ALLOW_THREADS
    got = guarded_run(reader, (const unsigned char *)self->base + lo, hi - lo, arg);
    Py_END_ALLOW_THREADS
    if (got < 0) {
        fault(self, lo, hi);
        return -1;
    }
    return 0;
}

static GuardedReadAPI read_api = {NULL, read_range, run_in_place};

static PyObject *GuardedMap_count_newlines(GuardedMap *self, PyObject *args) {
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "nn", &lo, &hi)) return NULL;
    PySlice_AdjustIndices(self->length, &lo, &hi, 1);
    if (hi <= lo) return PyLong_FromLong(0);
    Py_ssize_t count = guarded_count(self->base + lo, hi - lo);
    if (count < 0) return fault(self, lo, hi);
    return PyLong_FromSsize_t(count);
}

static PyObject *GuardedMap_check(GuardedMap *self, PyObject *Py_UNUSED(ignored)) {
    if (run_check(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef GuardedMap_methods[] = {
    {"count_newlines", (PyCFunction)GuardedMap_count_newlines, METH_VARARGS,
     "count_newlines(lo, hi) -> number of b'\\n' bytes in [lo, hi)"},
    {"check", (PyCFunction)GuardedMap_check, METH_NOARGS, "check() -> None: run the version check now"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods GuardedMap_mapping = {
    (lenfunc)GuardedMap_length,
    (binaryfunc)GuardedMap_subscript,
    NULL,
};

static PyTypeObject GuardedMapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sjsonl.storage._guarded.GuardedMap",
    .tp_basicsize = sizeof(GuardedMap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only map of a file whose slices raise instead of SIGBUS (see the module docstring).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)GuardedMap_init,
    .tp_dealloc = (destructor)GuardedMap_dealloc,
    .tp_as_mapping = &GuardedMap_mapping,
    .tp_methods = GuardedMap_methods,
};

typedef struct {
    PyObject_HEAD char *base;
    Py_ssize_t length;
    Py_ssize_t exports;
} FileMap;

static int FileMap_init(FileMap *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fd", "length", NULL};
    int fd;
    Py_ssize_t length;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "in", kwlist, &fd, &length)) return -1;
    if (length < 0 || self->base != NULL) {
        PyErr_SetString(PyExc_ValueError, "FileMap: length must be >= 0, and a map is made once");
        return -1;
    }
    if (length > 0) {
        void *p = mmap(NULL, (size_t)length, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        self->base = p;
    }
    self->length = length;
    return 0;
}

static void FileMap_dealloc(FileMap *self) {
    if (self->base != NULL) munmap(self->base, (size_t)self->length);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t FileMap_len(FileMap *self) { return self->length; }

static int FileMap_getbuffer(FileMap *self, Py_buffer *view, int flags) {
    static char empty = 0;
    void *base = self->base != NULL ? (void *)self->base : (void *)&empty;
    if (PyBuffer_FillInfo(view, (PyObject *)self, base, self->length, 1, flags) < 0) return -1;
    self->exports++;
    return 0;
}

static void FileMap_releasebuffer(FileMap *self, Py_buffer *view) {
    (void)view;
    self->exports--;
}

static PyBufferProcs FileMap_buffer = {
    (getbufferproc)FileMap_getbuffer,
    (releasebufferproc)FileMap_releasebuffer,
};

static PySequenceMethods FileMap_sequence = {
    .sq_length = (lenfunc)FileMap_len,
};

static PyTypeObject FileMapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sjsonl.storage._guarded.FileMap",
    .tp_basicsize = sizeof(FileMap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only map of a file with the buffer protocol, holding no descriptor.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)FileMap_init,
    .tp_dealloc = (destructor)FileMap_dealloc,
    .tp_as_buffer = &FileMap_buffer,
    .tp_as_sequence = &FileMap_sequence,
};

static struct PyModuleDef guarded_module = {
    PyModuleDef_HEAD_INIT, "_guarded", "Memory-mapped reads that raise instead of SIGBUS.", -1, NULL,
};

PyMODINIT_FUNC PyInit__guarded(void) {
    if (PyType_Ready(&GuardedMapType) < 0 || PyType_Ready(&FileMapType) < 0) return NULL;
    PyObject *m = PyModule_Create(&guarded_module);
    if (m == NULL) return NULL;
    Py_INCREF(&GuardedMapType);
    if (PyModule_AddObject(m, "GuardedMap", (PyObject *)&GuardedMapType) < 0) {
        Py_DECREF(&GuardedMapType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FileMapType);
    if (PyModule_AddObject(m, "FileMap", (PyObject *)&FileMapType) < 0) {
        Py_DECREF(&FileMapType);
        Py_DECREF(m);
        return NULL;
    }
    read_api.type = &GuardedMapType;
    PyObject *api = PyCapsule_New(&read_api, "sjsonl.storage._guarded._read_api", NULL);
    if (api == NULL || PyModule_AddObject(m, "_read_api", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
