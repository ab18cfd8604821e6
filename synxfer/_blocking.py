"""A blocking facade for scripts and notebooks: each call runs one client to completion.

Each function creates a :class:`~synxfer.Client`, runs one operation on a
fresh event loop and closes everything. Every function takes the client's
keyword arguments (``config``, ``endpoint_url``, ``region``, ``profile``,
``on_event``, ``follow_symlinks``, ``endpoints``, ``layers``,
``backend_options``) besides the operation's own.

Where the loop runs:

* No event loop running in the calling thread (a script): ``asyncio.run`` in
  the calling thread. No other thread is started.
* An event loop already running in the calling thread (Jupyter, IPython,
  any ``async def`` that calls a blocking function): ``asyncio.run`` cannot
  nest, so the operation runs on a private loop in a new worker thread, and
  the caller blocks until it finishes (its own loop is blocked meanwhile, as
  with any blocking call). The thread exists only for that call.

Either way exceptions reach the caller unchanged, and Ctrl-C
(``KeyboardInterrupt``) cancels the operation, waits for its clean-up (open
multipart uploads aborted, temp files removed, the client closed) and is
raised again. ``on_event`` runs on the loop's thread: the worker thread in
the second case.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from ._models import TransferResult
from .client import Client, PathLike

__all__ = ["copy", "download_file", "sync", "sync_from", "sync_to", "upload_file"]

#: Keyword arguments that configure the client rather than the operation.
_CLIENT_KEYS = frozenset(inspect.signature(Client).parameters)

T = TypeVar("T")


def _call(method: str, *args: Any, **kwargs: Any) -> TransferResult:
    client_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _CLIENT_KEYS}

    async def main() -> TransferResult:
        async with Client(**client_kwargs) as client:
            result: TransferResult = await getattr(client, method)(*args, **kwargs)
            return result

    return run_blocking(main)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` to completion and return its result, from any thread.

    ``main`` is a coroutine *function*: the coroutine is created on the loop
    that runs it, so nothing is left un-awaited when a loop is running here.
    """
    if not _loop_running():
        return asyncio.run(_as_coroutine(main))
    return _run_in_worker(main)


async def _as_coroutine(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


def _run_in_worker(main: Callable[[], Awaitable[T]]) -> T:
    """``main()`` on a private loop in a new thread; the caller waits for it."""
    outcome: list[T] = []
    error: list[BaseException] = []
    started, finished = threading.Event(), threading.Event()
    state: dict[str, Any] = {}

    async def guarded() -> None:
        state["loop"] = asyncio.get_running_loop()
        state["task"] = asyncio.current_task()
        started.set()
        outcome.append(await main())

    def worker() -> None:
        try:
            asyncio.run(guarded())
        except BaseException as exc:  # delivered to the caller's thread
            error.append(exc)
        finally:
            started.set()
            finished.set()

    thread = threading.Thread(target=worker, name="synxfer-blocking")
    try:
        # Ctrl-C raises here from before the thread starts: a SIGINT that came
        # between the start and the wait would otherwise go to the running
        # loop's handler, which cannot interrupt this wait.
        with _ctrl_c_raises():
            try:
                thread.start()
                finished.wait()
            except BaseException:
                if thread.ident is None:
                    raise  # interrupted before the operation began

                # Ctrl-C (or anything else raised in this thread while it
                # waits): cancel the operation, let it clean up, re-raise. A
                # second Ctrl-C while it cleans up is raised at once.
                started.wait()
                loop, task = state.get("loop"), state.get("task")
                if loop is not None and task is not None:
                    # RuntimeError: the loop has closed, so the operation is over.
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(task.cancel)
                finished.wait()
                raise
    finally:
        # Events, not join(), to wait: on 3.11 a join() interrupted by Ctrl-C
        # marks the thread finished while it runs on (bpo-45274's fix).
        if finished.is_set():
            thread.join()
    if error:
        raise error[0]
    return outcome[0]


@contextlib.contextmanager
def _ctrl_c_raises() -> Iterator[None]:
    """While the caller blocks, Ctrl-C raises KeyboardInterrupt here.

    The running loop may have its own SIGINT handler (``asyncio.Runner``
    cancels its main task), which could act only after this blocking call
    returned: the transfer would run on, deaf to Ctrl-C. Its handler is put
    back afterwards. Only the main thread receives signals.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or previous is signal.default_int_handler:  # ignored, or raises
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def sync_to(local: PathLike, url: str, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.sync_to`."""
    return _call("sync_to", local, url, **kwargs)


def sync_from(url: str, local: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.sync_from`."""
    return _call("sync_from", url, local, **kwargs)


def sync(src: PathLike, dst: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.sync`."""
    return _call("sync", src, dst, **kwargs)


def copy(src: PathLike, dst: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.copy`."""
    return _call("copy", src, dst, **kwargs)


def upload_file(path: PathLike, url: str, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.upload_file`."""
    return _call("upload_file", path, url, **kwargs)


def download_file(url: str, path: PathLike, **kwargs: Any) -> TransferResult:
    """Blocking :meth:`Client.download_file`."""
    return _call("download_file", url, path, **kwargs)
