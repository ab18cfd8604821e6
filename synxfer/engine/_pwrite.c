/* A buffer written at an offset in chunks of at most `chunk` bytes, in one
 * C call (synxfer/engine/_os.py: chunked_pwrite; decision 0052).
 *
 * Why: the page cache of the VMs this was measured on must be written in
 * small pieces (32 KiB; decision 0012), and each os.pwrite from Python gives
 * the GIL up and takes it back: 32 hand-overs per MiB between the threads
 * writing files, the threads receiving and the event loop. Here the GIL is
 * given up once (ctypes releases it around the call).
 *
 * Returns 0 when all n bytes were written, else the errno of the failed
 * pwrite (EIO for a write that wrote nothing). EINTR is retried, as Python
 * does.
 */
#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

int synxfer_pwrite_all(int fd, const char *buf, long long n, long long offset, long long chunk)
{
    long long done = 0;
    while (done < n) {
        long long want = n - done < chunk ? n - done : chunk;
        ssize_t w = pwrite(fd, buf + done, (size_t)want, (off_t)(offset + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (w == 0)
            return EIO;
        done += w;
    }
    return 0;
}
