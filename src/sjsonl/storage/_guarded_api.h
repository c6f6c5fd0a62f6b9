/* The C interface of sjsonl/storage/_guarded.c for other extensions: the capsule
   "sjsonl.storage._guarded._read_api" points to one GuardedReadAPI (PyCapsule_Import; NULL where the
   extension was not built, and the callers then go through Python). */
#ifndef SJSONL_GUARDED_API_H
#define SJSONL_GUARDED_API_H
#include <Python.h>

/* What run_in_place runs: the n bytes at p, read in place under the guard, without the GIL. */
typedef void (*GuardedReader)(const unsigned char *p, Py_ssize_t n, void *arg);

typedef struct {
    PyTypeObject *type; /* GuardedMap: what the functions below take as `map` */
    /* map[lo:hi] as bytes without the slice object of PyObject_GetItem (sjsonl.data._hot: ~50 ns of a
       ~1 µs ds[i]): the same version check, bounds and guarded copy */
    PyObject *(*read_range)(PyObject *map, Py_ssize_t lo, Py_ssize_t hi);
    /* reader(map + lo, hi - lo, arg) on the mapped bytes themselves — no copy (sjsonl.records._types: the
       copy was a third of typing a file). The version check first, as a slice's; the GIL released while it
       runs. 0; or -1 with an exception set: [lo, hi) not within the map, or a page that could not be read
       (the file cut short under the reader: the reader is abandoned where it was, as a copy would be, so it
       must hold no lock and leave nothing its caller cannot free). */
    int (*run_in_place)(PyObject *map, Py_ssize_t lo, Py_ssize_t hi, GuardedReader reader, void *arg);
} GuardedReadAPI;

#endif
