/* The recorder's hot path in one compiled call: record_writer.Producer.put for one frame of encoded
 * bytes, on the shared-descriptor path (x86), when no other thread holds a turn.
 *
 * Why: the first add_frame after the control loop's sleep runs with the interpreter's code and data
 * out of the CPU's caches, where each of put()'s ~80 bytecodes costs a fraction of a microsecond: its
 * p99 was ~2.2x that of a bare copy of the same bytes (tools/bench_record.py). Here the same steps
 * are a few dozen machine instructions around the memcpy.
 *
 * Semantics are put()'s, step for step (record_writer.py is the reference; tests/test_record_ring.py
 * compares the two on the same sequences): the item never wraps, starts the next lap when the
 * writer has released everything, the head moves before the descriptor, and the published count
 * is stored last. The call holds the GIL from start to end, so no other Python thread runs inside
 * it; a thread that holds a turn (``turns`` not empty) is in the middle of a Python put(), and then
 * this returns NotImplemented and the caller takes the Python path (which waits for its turn).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Copy into the ring with non-temporal stores where the CPU has them: the ring's bytes were last
 * read by the writer process on another core, so an ordinary store first fetches each line from
 * there (a read for ownership), which made the copy ~1.4x slower than one into memory this core had
 * just freed; streaming stores write the lines without reading them. The fence after them orders
 * them before the descriptor's and count's ordinary stores (streaming stores are weakly ordered). */
static void ring_copy(char *dst, const char *src, size_t n) {
#if defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (n < 256 || head > n) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, head);
    dst += head; src += head; n -= head;
    size_t blocks = n / 64;
    for (size_t i = 0; i < blocks; i++) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
        src += 64; dst += 64;
    }
    memcpy(dst, src, n - blocks * 64);
    _mm_sfence();
#else
    memcpy(dst, src, n);
#endif
}

static PyObject *s_turns, *s_open, *s_shared, *s_published, *s_words, *s_slots, *s_capacity, *s_floor,
    *s_head, *s_data, *s_mm, *s_desc, *s_desc_end, *s_peak, *s_frame_limit;
static Py_ssize_t HEADER_WORDS = -1, W_TAIL, W_PUBLISHED, W_TAKEN, DESC_WORDS;

static int get_ll(PyObject *o, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_ll(PyObject *o, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return r;
}

/* configure(header_words, tail, published, taken, descriptor_words): record_writer's constants */
static PyObject *configure(PyObject *self, PyObject *args) {
    if (!PyArg_ParseTuple(args, "nnnnn", &HEADER_WORDS, &W_TAIL, &W_PUBLISHED, &W_TAKEN, &DESC_WORDS))
        return NULL;
    Py_RETURN_NONE;
}

/* put_frame(producer, data, nbytes, ts, key) -> True (stored), False (not kept: full, closed),
 * NotImplemented (take the Python path: a turn is held, descriptors not shared, not a simple buffer) */
static PyObject *put_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "put_frame(producer, data, nbytes, ts, key)");
        return NULL;
    }
    PyObject *p = args[0], *data = args[1];
    long long nbytes = PyLong_AsLongLong(args[2]);
    long long ts = PyLong_AsLongLong(args[3]);
    long long key = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (HEADER_WORDS < 0) Py_RETURN_NOTIMPLEMENTED;

    PyObject *turns = PyObject_GetAttr(p, s_turns);
    if (turns == NULL) return NULL;
    Py_ssize_t busy = PyList_Check(turns) ? PyList_GET_SIZE(turns) : 1;
    Py_DECREF(turns);
    if (busy) Py_RETURN_NOTIMPLEMENTED;
    PyObject *v = PyObject_GetAttr(p, s_shared);
    if (v == NULL) return NULL;
    int shared = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (shared != 1) Py_RETURN_NOTIMPLEMENTED;
    v = PyObject_GetAttr(p, s_open);
    if (v == NULL) return NULL;
    int open = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (open != 1) Py_RETURN_FALSE;

    Py_buffer src, words, mm;
    if (PyObject_GetBuffer(data, &src, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;  /* not a contiguous buffer: put() copies it its own way */
    }
    if (src.len < nbytes) {
        PyBuffer_Release(&src);
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *wo = PyObject_GetAttr(p, s_words);
    PyObject *mo = wo ? PyObject_GetAttr(p, s_mm) : NULL;
    if (mo == NULL) {
        Py_XDECREF(wo);
        PyBuffer_Release(&src);
        return NULL;
    }
    if (PyObject_GetBuffer(wo, &words, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();  /* the ring was unmapped (closed): nothing is put */
        Py_DECREF(wo); Py_DECREF(mo); PyBuffer_Release(&src);
        Py_RETURN_FALSE;
    }
    if (PyObject_GetBuffer(mo, &mm, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&words); Py_DECREF(wo); Py_DECREF(mo); PyBuffer_Release(&src);
        Py_RETURN_FALSE;
    }
    PyObject *result = NULL;
    volatile long long *w = (volatile long long *)words.buf;
    long long published, slots, cap, floor, start, base_off, desc, desc_end, peak, limit;
    if (get_ll(p, s_published, &published) || get_ll(p, s_slots, &slots) || get_ll(p, s_capacity, &cap)
        || get_ll(p, s_floor, &floor) || get_ll(p, s_head, &start) || get_ll(p, s_data, &base_off)
        || get_ll(p, s_desc, &desc) || get_ll(p, s_desc_end, &desc_end) || get_ll(p, s_peak, &peak)
        || get_ll(p, s_frame_limit, &limit))
        goto done;
    if (published - w[W_TAKEN] >= slots) {  /* descriptors full */
        result = Py_False;
        Py_INCREF(result);
        goto done;
    }
    long long size = (nbytes + 7) & ~7LL;
    long long tail = w[W_TAIL];
    long long off = start % cap;
    if (off && (off + size > cap || start == tail)) {
        if (start == tail) floor = start + cap - off;
        start += cap - off;
        off = 0;
    }
    long long base = tail > floor ? tail : floor;
    if (start + size - base > limit || base_off + off + nbytes > (long long)mm.len) {
        result = Py_False;
        Py_INCREF(result);
        goto done;
    }
    ring_copy((char *)mm.buf + base_off + off, (const char *)src.buf, (size_t)nbytes);
    long long end = start + size;
    if (set_ll(p, s_head, end) || set_ll(p, s_floor, floor)) goto done;
    w[desc] = ts;
    w[desc + 1] = start;
    w[desc + 2] = nbytes;
    w[desc + 3] = key;
    w[desc + 4] = 0;
    __atomic_thread_fence(__ATOMIC_RELEASE);  /* the bytes and the descriptor before the count */
    long long next = desc + DESC_WORDS < desc_end ? desc + DESC_WORDS : HEADER_WORDS;
    published += 1;
    if (set_ll(p, s_desc, next) || set_ll(p, s_published, published)) goto done;
    w[W_PUBLISHED] = published;
    if (end - base > peak && set_ll(p, s_peak, end - base)) goto done;
    result = Py_True;
    Py_INCREF(result);
done:
    PyBuffer_Release(&mm);
    PyBuffer_Release(&words);
    Py_DECREF(wo);
    Py_DECREF(mo);
    PyBuffer_Release(&src);
    return result;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "record_writer's constants"},
    {"put_frame", (PyCFunction)(void (*)(void))put_frame, METH_FASTCALL, "Producer.put of one encoded frame"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ringput", NULL, -1, methods};

PyMODINIT_FUNC PyInit__ringput(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_turns, "turns"); INTERN(s_open, "open"); INTERN(s_shared, "shared");
    INTERN(s_published, "published"); INTERN(s_words, "words"); INTERN(s_slots, "slots");
    INTERN(s_capacity, "capacity"); INTERN(s_floor, "floor"); INTERN(s_head, "head"); INTERN(s_data, "data");
    INTERN(s_mm, "mm"); INTERN(s_desc, "desc"); INTERN(s_desc_end, "desc_end"); INTERN(s_peak, "peak");
    INTERN(s_frame_limit, "frame_limit");
    return PyModule_Create(&module);
}
