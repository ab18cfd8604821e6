/* The HTTPS body loop of synxfer/backend/_tls.py in C (decision 0046).
 *
 * Why: Python's SSLSocket.read returns one TLS record (16 KiB at most) per
 * call and takes the GIL back after each one; with several receive threads,
 * the event loop and the file-writing threads all wanting the GIL, every
 * record of a body costs a GIL hand-over (futex calls, context switches).
 * This loop fills the whole body with SSL_read_ex while Python has let go
 * of the GIL once (ctypes releases it around the call).
 *
 * It calls the OpenSSL that Python's _ssl module uses: the function
 * pointers are looked up by the caller in _ssl's own link map, so no OpenSSL
 * header or library is needed to build this file. The socket is the
 * SSLSocket's, in timeout mode (O_NONBLOCK): a wait for data is a poll()
 * of at most timeout_ms.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>

typedef int (*read_ex_fn)(void *ssl, void *buf, size_t num, size_t *readbytes);
typedef int (*get_error_fn)(const void *ssl, int ret);
typedef void (*clear_error_fn)(void);

/* SSL_get_error's codes (openssl/ssl.h, stable since OpenSSL 0.9). */
#define SX_SSL_ERROR_WANT_READ 2
#define SX_SSL_ERROR_WANT_WRITE 3
#define SX_SSL_ERROR_SYSCALL 5
#define SX_SSL_ERROR_ZERO_RETURN 6

/* *status on return: */
#define SX_FULL 0    /* buf[0:n] filled */
#define SX_TIMEOUT 1 /* no data for timeout_ms */
#define SX_EOF 2     /* the peer closed (close_notify, or a bare end of stream) */
#define SX_ERROR 3   /* a TLS or socket error; *err is errno (0: a TLS error) */

long synxfer_tls_fill(read_ex_fn read_ex, get_error_fn get_error, clear_error_fn clear_error,
                      void *ssl, int fd, char *buf, long n, int timeout_ms, int *status,
                      int *err)
{
    long got = 0;
    *status = SX_FULL;
    *err = 0;
    while (got < n) {
        size_t r = 0;
        errno = 0;
        if (read_ex(ssl, buf + got, (size_t)(n - got), &r) == 1) {
            got += (long)r;
            continue;
        }
        int e = get_error(ssl, 0);
        int saved = errno;
        if (e == SX_SSL_ERROR_WANT_READ || e == SX_SSL_ERROR_WANT_WRITE) {
            struct pollfd p = {fd, e == SX_SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
            int rc = poll(&p, 1, timeout_ms);
            if (rc > 0)
                continue;
            if (rc == 0) {
                *status = SX_TIMEOUT;
                return got;
            }
            if (errno == EINTR)
                continue;
            *status = SX_ERROR;
            *err = errno;
            return got;
        }
        clear_error();
        if (e == SX_SSL_ERROR_ZERO_RETURN || (e == SX_SSL_ERROR_SYSCALL && saved == 0)) {
            *status = SX_EOF;
            return got;
        }
        *status = SX_ERROR;
        *err = e == SX_SSL_ERROR_SYSCALL ? saved : 0;
        return got;
    }
    return got;
}
