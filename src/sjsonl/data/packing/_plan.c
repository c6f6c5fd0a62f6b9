/* Bin packing for sequence packs (sjsonl.data.packing.plan), compiled: which pack each piece goes to.
 *
 *   assign(sizes, capacity, best, decreasing) -> (bins, count)
 *
 * sizes: an int32 buffer, the token counts of the pieces in source order (each 1..capacity).
 * best: best fit (the open pack with the least room that still holds the piece) rather than first fit
 * (the lowest-numbered such pack). decreasing: place the pieces largest first (ties in source order)
 * rather than in source order. Packs are numbered in the order they are opened.
 * Returns bins (bytes holding one int32 pack number per piece, in source order) and the pack count.
 *
 * Best fit keeps, for each room r in 0..capacity, a stack of the open packs with exactly that room and a
 * segment tree over r telling which rooms have any; a piece of size s takes the top pack of the smallest
 * room >= s: O(log capacity) a piece. First fit keeps a segment tree over the packs holding their room
 * (a max tree, grown by doubling): a piece descends to the leftmost pack with room >= s, O(log packs).
 * The Python twin in plan.py gives the same bins (tests/test_pack_plan.py holds them to each other).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The order pieces are placed in: by size, largest first, ties in source order (a counting sort). */
static int32_t *decreasing_order(const int32_t *sizes, Py_ssize_t n, int32_t capacity) {
    Py_ssize_t *start = PyMem_RawCalloc((size_t)capacity + 2, sizeof(Py_ssize_t));
    int32_t *order = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!start || !order) {
        PyMem_RawFree(start);
        PyMem_RawFree(order);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) start[capacity - sizes[i] + 1]++; /* slot 0 holds the largest */
    for (int32_t k = 1; k <= capacity + 1; k++) start[k] += start[k - 1];
    for (Py_ssize_t i = 0; i < n; i++) order[start[capacity - sizes[i]]++] = (int32_t)i;
    PyMem_RawFree(start);
    return order;
}

static int best_fit(const int32_t *sizes, const int32_t *order, Py_ssize_t n, int32_t capacity,
                    int32_t *bins, Py_ssize_t *count) {
    Py_ssize_t leaves = 1;
    while (leaves < (Py_ssize_t)capacity + 1) leaves <<= 1;
    /* tree[k]: how many open packs have a room in node k's range; rooms are leaves 0..capacity */
    Py_ssize_t *tree = PyMem_RawCalloc((size_t)(2 * leaves), sizeof(Py_ssize_t));
    int32_t *head = PyMem_RawMalloc(((size_t)capacity + 1) * sizeof(int32_t)); /* top pack of each room's stack */
    /* per pack (grown by doubling: packs are far fewer than pieces): the pack under it, and its room */
    Py_ssize_t room_for = 1024;
    int32_t *below = PyMem_RawMalloc((size_t)room_for * sizeof(int32_t));
    int32_t *room = PyMem_RawMalloc((size_t)room_for * sizeof(int32_t));
    if (!tree || !head || !below || !room) {
        PyMem_RawFree(tree);
        PyMem_RawFree(head);
        PyMem_RawFree(below);
        PyMem_RawFree(room);
        return -1;
    }
    for (int32_t r = 0; r <= capacity; r++) head[r] = -1;
    Py_ssize_t packs = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = order ? order[k] : k;
        int32_t s = sizes[i];
        int32_t pack = -1;
        /* the smallest room r >= s with an open pack: walk up from leaf s, then down the leftmost branch */
        Py_ssize_t node = leaves + s;
        if (!tree[node]) {
            while (node > 1 && (node & 1 || !tree[node + 1])) node >>= 1;
            if (node > 1) {
                node += 1;
                while (node < leaves) node = tree[2 * node] ? 2 * node : 2 * node + 1;
            } else {
                node = 0;
            }
        }
        if (node) {
            int32_t r = (int32_t)(node - leaves);
            pack = head[r];
            head[r] = below[pack];
            for (Py_ssize_t x = node; x; x >>= 1) tree[x]--;
        } else {
            if (packs == room_for) {
                int32_t *more_below = PyMem_RawRealloc(below, (size_t)(2 * room_for) * sizeof(int32_t));
                if (more_below) below = more_below;
                int32_t *more_room = more_below ? PyMem_RawRealloc(room, (size_t)(2 * room_for) * sizeof(int32_t)) : NULL;
                if (more_room) room = more_room;
                if (!more_below || !more_room) {
                    PyMem_RawFree(tree);
                    PyMem_RawFree(head);
                    PyMem_RawFree(below);
                    PyMem_RawFree(room);
                    return -1;
                }
                room_for *= 2;
            }
            pack = (int32_t)packs++;
            room[pack] = capacity;
        }
        bins[i] = pack;
        int32_t left = room[pack] -= s;
        if (left > 0) { /* a full pack takes no more pieces: it leaves the structure */
            below[pack] = head[left];
            head[left] = pack;
            for (Py_ssize_t x = leaves + left; x; x >>= 1) tree[x]++;
        }
    }
    PyMem_RawFree(tree);
    PyMem_RawFree(head);
    PyMem_RawFree(below);
    PyMem_RawFree(room);
    *count = packs;
    return 0;
}

static int first_fit(const int32_t *sizes, const int32_t *order, Py_ssize_t n, int32_t capacity,
                     int32_t *bins, Py_ssize_t *count) {
    Py_ssize_t leaves = 1024;
    int32_t *tree = PyMem_RawCalloc((size_t)(2 * leaves), sizeof(int32_t)); /* max room in each node's range */
    if (!tree) return -1;
    Py_ssize_t packs = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = order ? order[k] : k;
        int32_t s = sizes[i];
        Py_ssize_t node = 1;
        if (tree[1] < s) { /* no open pack holds it: open one (leaves of unopened packs hold 0) */
            if (packs == leaves) { /* grow: the old tree becomes the left half of a tree twice as wide */
                int32_t *grown = PyMem_RawCalloc((size_t)(4 * leaves), sizeof(int32_t));
                if (!grown) {
                    PyMem_RawFree(tree);
                    return -1;
                }
                for (Py_ssize_t level = leaves; level >= 1; level >>= 1)
                    memcpy(grown + 2 * level, tree + level, (size_t)level * sizeof(int32_t));
                grown[1] = grown[2];
                PyMem_RawFree(tree);
                tree = grown;
                leaves *= 2;
            }
            node = leaves + packs++;
            tree[node] = capacity;
        } else {
            while (node < leaves) node = tree[2 * node] >= s ? 2 * node : 2 * node + 1;
        }
        bins[i] = (int32_t)(node - leaves);
        tree[node] -= s;
        for (node >>= 1; node; node >>= 1) {
            int32_t a = tree[2 * node], b = tree[2 * node + 1];
            tree[node] = a > b ? a : b;
        }
    }
    PyMem_RawFree(tree);
    *count = packs;
    return 0;
}

/* A value of v[0..n) outside lo..hi: a ValueError naming it (and the buffer released), 1; else 0. */
static int outside(Py_buffer *view, const int32_t *v, Py_ssize_t n, Py_ssize_t lo, Py_ssize_t hi,
                   const char *what) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > hi) {
            PyBuffer_Release(view);
            PyErr_Format(PyExc_ValueError, "piece %zd has %s %d, outside %zd..%zd", i, what, (int)v[i], lo, hi);
            return 1;
        }
    }
    return 0;
}

static PyObject *mod_assign(PyObject *self, PyObject *args) {
    Py_buffer view;
    int capacity, best, decreasing;
    if (!PyArg_ParseTuple(args, "y*ipp", &view, &capacity, &best, &decreasing)) return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(int32_t);
    const int32_t *sizes = view.buf;
    if (capacity < 1 || view.len % (Py_ssize_t)sizeof(int32_t)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "assign() takes int32 sizes and a capacity >= 1");
        return NULL;
    }
    if (outside(&view, sizes, n, 1, capacity, "size")) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int32_t *bins = (int32_t *)PyBytes_AS_STRING(out);
    Py_ssize_t count = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS;
    int32_t *order = decreasing ? decreasing_order(sizes, n, capacity) : NULL;
    if (decreasing && !order)
        failed = 1;
    else
        failed = (best ? best_fit : first_fit)(sizes, order, n, capacity, bins, &count) != 0;
    PyMem_RawFree(order);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    if (failed) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return Py_BuildValue("(Nn)", out, count);
}

/* group(bins, count) -> (order, bounds): the pieces (their indices, int32) sorted by pack, stable — a
 * counting sort, in place of numpy's argsort, whose int64 result is twice the size — and where each pack's
 * pieces start in that order (count + 1 int32s; the bounds are the sort's own cursors, shifted by one). */
static PyObject *mod_group(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count)) return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(int32_t);
    const int32_t *bins = view.buf;
    if (count < 0 || view.len % (Py_ssize_t)sizeof(int32_t) || n > INT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "group() takes under 2**31 int32 bins and a count >= 0");
        return NULL;
    }
    if (outside(&view, bins, n, 0, count - 1, "pack")) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    PyObject *starts = PyBytes_FromStringAndSize(NULL, (count + 1) * (Py_ssize_t)sizeof(int32_t));
    if (!out || !starts) {
        Py_XDECREF(out);
        Py_XDECREF(starts);
        PyBuffer_Release(&view);
        return NULL;
    }
    int32_t *order = (int32_t *)PyBytes_AS_STRING(out);
    int32_t *bounds = (int32_t *)PyBytes_AS_STRING(starts);
    Py_BEGIN_ALLOW_THREADS;
    memset(bounds, 0, (size_t)(count + 1) * sizeof(int32_t));
    for (Py_ssize_t i = 0; i < n; i++) bounds[bins[i] + 1]++;
    for (Py_ssize_t p = 0; p < count; p++) bounds[p + 1] += bounds[p];  /* bounds[p]: where pack p starts */
    for (Py_ssize_t i = 0; i < n; i++) order[bounds[bins[i]]++] = (int32_t)i; /* now: where it ends */
    if (count) memmove(bounds + 1, bounds, (size_t)count * sizeof(int32_t));
    bounds[0] = 0;
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    return Py_BuildValue("(NN)", out, starts);
}

static PyMethodDef module_methods[] = {
    {"assign", mod_assign, METH_VARARGS, "assign(sizes, capacity, best, decreasing) -> (bins, count)"},
    {"group", mod_group, METH_VARARGS, "group(bins, count) -> (order, bounds) (int32, stable by pack)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_plan", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__plan(void) { return PyModule_Create(&module); }
