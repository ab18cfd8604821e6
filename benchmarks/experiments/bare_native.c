/* bare_native: the native floor of benchmarks/experiments/bare_download.py (--mode native).
 *
 * NOT part of synxfer. One call receives a GET body from a socket, CRC32Cs
 * each piece while it is in the CPU's cache and writes it with 32 KiB
 * pwrite calls, all without the GIL: what a native receive + CRC + write
 * data plane could do under synxfer's start-up. Measured in
 * docs/decisions/0021-the-download-floor.md. bare_download.py compiles it with
 * the system C compiler on first use (x86-64 with SSE4.2).
 *
 * CRC32C: three interleaved crc32q streams combined with zero-shift tables,
 * after Mark Adler's crc32c.c (zlib licence), checked against fastcrc at load.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <nmmintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <sys/socket.h>

#define POLY 0x82f63b78
#define LONG 8192
#define SHORT 256
static uint32_t crc32c_long[4][256], crc32c_short[4][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t gf2_matrix_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) { if (vec & 1) sum ^= *mat; vec >>= 1; mat++; }
    return sum;
}
static void gf2_matrix_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(mat, mat[n]);
}
static void zeros_op(uint32_t *even, size_t len) {
    uint32_t odd[32], row = 1;
    odd[0] = POLY;
    for (int n = 1; n < 32; n++) { odd[n] = row; row <<= 1; }
    gf2_matrix_square(even, odd);
    gf2_matrix_square(odd, even);
    do {
        gf2_matrix_square(even, odd);
        len >>= 1;
        if (len == 0) return;
        gf2_matrix_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof(odd));
}
static void zeros(uint32_t z[][256], size_t len) {
    uint32_t op[32];
    zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++) {
        z[0][n] = gf2_matrix_times(op, n);
        z[1][n] = gf2_matrix_times(op, n << 8);
        z[2][n] = gf2_matrix_times(op, n << 16);
        z[3][n] = gf2_matrix_times(op, n << 24);
    }
}
static void init(void) { zeros(crc32c_long, LONG); zeros(crc32c_short, SHORT); }
static inline uint32_t shift(uint32_t z[][256], uint32_t crc) {
    return z[0][crc & 0xff] ^ z[1][(crc >> 8) & 0xff] ^ z[2][(crc >> 16) & 0xff] ^ z[3][crc >> 24];
}
/* Three crc32q streams over `block`-byte thirds of each 3*block bytes, then
 * combined: the crc32 instruction has a latency of three cycles and a
 * throughput of one, so one stream would run at a third of the speed. */
static const unsigned char *crc_blocks(uint64_t *crc, const unsigned char *next, size_t *len,
                                       size_t block, uint32_t z[][256]) {
    uint64_t crc0 = *crc;
    while (*len >= block * 3) {
        uint64_t crc1 = 0, crc2 = 0;
        const unsigned char *end = next + block;
        do {
            uint64_t a, b, c;
            memcpy(&a, next, 8); memcpy(&b, next + block, 8); memcpy(&c, next + 2 * block, 8);
            crc0 = _mm_crc32_u64(crc0, a); crc1 = _mm_crc32_u64(crc1, b); crc2 = _mm_crc32_u64(crc2, c);
            next += 8;
        } while (next < end);
        crc0 = shift(z, (uint32_t)crc0) ^ crc1;
        crc0 = shift(z, (uint32_t)crc0) ^ crc2;
        next += block * 2; *len -= block * 3;
    }
    *crc = crc0;
    return next;
}

static uint32_t crc32c_hw(uint32_t crc, const unsigned char *next, size_t len) {
    uint64_t crc0 = crc ^ 0xffffffffu;
    const unsigned char *end;
    while (len && ((uintptr_t)next & 7) != 0) { crc0 = _mm_crc32_u8((uint32_t)crc0, *next); next++; len--; }
    next = crc_blocks(&crc0, next, &len, LONG, crc32c_long);
    next = crc_blocks(&crc0, next, &len, SHORT, crc32c_short);
    end = next + (len - (len & 7));
    while (next < end) { uint64_t a; memcpy(&a, next, 8); crc0 = _mm_crc32_u64(crc0, a); next += 8; }
    len &= 7;
    while (len) { crc0 = _mm_crc32_u8((uint32_t)crc0, *next); next++; len--; }
    return (uint32_t)crc0 ^ 0xffffffffu;
}

static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer b; unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &b, &crc)) return NULL;
    pthread_once(&once, init);
    Py_BEGIN_ALLOW_THREADS
    crc = crc32c_hw(crc, b.buf, (size_t)b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(crc);
}

/* recv_crc_pwrite(sock, fd, offset, length, buf, crc=0, chunk=32768) -> crc
 *
 * Receives `length` bytes from `sock` (blocking or not) through `buf`, and
 * writes each piece at `offset` onwards in `fd`; returns the running CRC32C
 * continued from `crc`. OSError on a failed call, ConnectionError on EOF. */
static PyObject *py_recv_crc_pwrite(PyObject *self, PyObject *args) {
    int sock, fd; long long offset, length; Py_buffer b; unsigned int crc = 0; Py_ssize_t chunk = 32768;
    if (!PyArg_ParseTuple(args, "iiLLw*|In", &sock, &fd, &offset, &length, &b, &crc, &chunk)) return NULL;
    pthread_once(&once, init);
    long long got = 0; int err = 0; int eof = 0;
    unsigned char *buf = b.buf; size_t cap = (size_t)b.len;
    Py_BEGIN_ALLOW_THREADS
    while (got < length) {
        size_t want = (size_t)(length - got) < cap ? (size_t)(length - got) : cap;
        ssize_t n = recv(sock, buf, want, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {sock, POLLIN, 0};
                int ready = poll(&p, 1, 60000);
                if (ready == 0) { err = ETIMEDOUT; break; } /* errno is stale here */
                if (ready < 0 && errno != EINTR) { err = errno; break; }
                continue;
            }
            err = errno; break;
        }
        if (n == 0) { eof = 1; break; }
        crc = crc32c_hw(crc, buf, (size_t)n);
        size_t o = 0;
        while (o < (size_t)n) {
            size_t w = (size_t)n - o < (size_t)chunk ? (size_t)n - o : (size_t)chunk;
            ssize_t k = pwrite(fd, buf + o, w, offset + got + (long long)o);
            if (k < 0) { if (errno == EINTR) continue; err = errno; break; }
            o += (size_t)k;
        }
        if (err) break;
        got += n;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (err) { errno = err; return PyErr_SetFromErrno(PyExc_OSError); }
    if (eof) { PyErr_SetString(PyExc_ConnectionError, "connection closed mid-body"); return NULL; }
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"crc32c", py_crc32c, METH_VARARGS, NULL},
    {"recv_crc_pwrite", py_recv_crc_pwrite, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "bare_native", NULL, -1, methods};
PyMODINIT_FUNC PyInit_bare_native(void) { return PyModule_Create(&mod); }
