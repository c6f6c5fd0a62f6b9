/* UTF-8 validation of a record's bytes, without building a str.

   A projection (sjsonl.records.fields) lets msgspec skip the fields it does not return, and msgspec does
   not check the UTF-8 of what it skips; the record is still refused when any of its bytes are not UTF-8,
   as json.loads refuses it. In Python that check is bytes.decode("utf-8"), which builds the whole text as
   a str only to drop it: on ~180-byte records of mostly non-ASCII text that cost more than the projected
   parse itself. This walks the bytes once instead: eight ASCII bytes at a time, then each multi-byte
   sequence against the well-formed table of Unicode (chapter 3, table 3-7) — exactly what Python's strict
   decoder accepts: no overlong forms, no surrogates (ED A0..BF), nothing past U+10FFFF.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
is_valid(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if ((word & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i += 1;
            continue;
        }
        Py_ssize_t need;
        unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0; /* 80..C1 (a continuation or an overlong lead), F5..FF */
        }
        if (i + need >= n) {
            return 0; /* the sequence runs past the end */
        }
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (Py_ssize_t k = 2; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        }
        i += need + 1;
    }
    return 1;
}

static PyObject *
valid(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int ok = is_valid((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"valid", valid, METH_O, "valid(data) -> bool: whether the bytes of data are well-formed UTF-8."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_utf8", "UTF-8 validation without decoding (see the source's header).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__utf8(void)
{
    return PyModule_Create(&module);
}
