"""The shared retry loop: a plain first attempt, then tenacity on the same schedule."""

from __future__ import annotations

import pytest

from synxfer import IntegrityError, RetryPolicy, TransientError
from synxfer._retry import Retrier, call_with_retries, retrying

FAST = RetryPolicy(attempts=4, initial_delay=0.001, max_delay=0.002)


class Flaky:
    """Fails ``failures`` times with ``error``, then returns ``"ok"``."""

    def __init__(self, failures: int, error: type[Exception] = TransientError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self, value: str) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return value


async def test_success_is_one_plain_call() -> None:
    seen: list[tuple[str, int, str]] = []
    fn = Flaky(0)
    result = await call_with_retries(
        FAST, "op", TransientError, lambda o, n, e: seen.append((o, n, str(e))), fn, "ok"
    )
    assert (result, fn.calls, seen) == ("ok", 1, [])


@pytest.mark.parametrize("failures", [1, 2, 3])
async def test_attempts_and_hook_numbers_continue_after_the_first(failures: int) -> None:
    seen: list[tuple[str, int, str]] = []
    fn = Flaky(failures)
    result = await call_with_retries(
        FAST, "put", TransientError, lambda o, n, e: seen.append((o, n, str(e))), fn, "ok"
    )
    assert result == "ok"
    assert fn.calls == failures + 1
    assert seen == [("put", n, f"failure {n}") for n in range(1, failures + 1)]


async def test_gives_up_after_the_policys_attempts_with_the_last_error() -> None:
    seen: list[int] = []
    fn = Flaky(10)
    with pytest.raises(TransientError, match="failure 4"):
        await call_with_retries(
            FAST, "get", TransientError, lambda o, n, e: seen.append(n), fn, "x"
        )
    assert fn.calls == FAST.attempts
    assert seen == [1, 2, 3]


async def test_one_attempt_means_no_retry() -> None:
    fn = Flaky(1)
    with pytest.raises(TransientError):
        await call_with_retries(RetryPolicy(attempts=1), "op", TransientError, None, fn, "x")
    assert fn.calls == 1


async def test_other_errors_pass_through_at_once() -> None:
    seen: list[int] = []
    fn = Flaky(1, error=IntegrityError)
    with pytest.raises(IntegrityError):
        await call_with_retries(FAST, "op", TransientError, lambda o, n, e: seen.append(n), fn, "x")
    assert (fn.calls, seen) == (1, [])


async def test_same_schedule_as_the_plain_tenacity_loop() -> None:
    """Both paths make the same attempts and report the same attempt numbers."""
    for failures in range(6):
        plain_seen: list[int] = []
        fast_seen: list[int] = []
        plain, fast = Flaky(failures), Flaky(failures)
        outcomes = []
        for fn, seen, run in (
            (
                plain,
                plain_seen,
                lambda fn, hook: retrying(FAST, "op", TransientError, hook)(fn, "ok"),
            ),
            (
                fast,
                fast_seen,
                lambda fn, hook: call_with_retries(FAST, "op", TransientError, hook, fn, "ok"),
            ),
        ):
            try:
                outcomes.append(await run(fn, lambda o, n, e, seen=seen: seen.append(n)))
            except TransientError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
        assert (plain.calls, plain_seen) == (fast.calls, fast_seen)


def test_the_continued_loop_keeps_the_backoff_curve() -> None:
    """After the plain first attempt, tenacity's n-th wait is the policy's (n+1)-th."""
    policy = RetryPolicy(attempts=6, initial_delay=0.1, max_delay=10.0)
    rest = retrying(policy, "op", TransientError, _first_attempt=2)
    assert rest.stop.max_attempt_number == 5  # type: ignore[attr-defined]
    assert rest.wait.multiplier == pytest.approx(0.2)  # type: ignore[attr-defined]
    assert rest.wait.max == 10.0  # type: ignore[attr-defined]


async def test_a_bound_retrier_retries_as_call_with_retries() -> None:
    seen: list[tuple[str, int]] = []
    retry = Retrier(FAST, "download", IntegrityError, lambda o, n, e: seen.append((o, n)))
    fn = Flaky(2, IntegrityError)
    assert await retry(fn, "ok") == "ok"
    assert fn.calls == 3
    assert seen == [("download", 1), ("download", 2)]
    fn = Flaky(10, IntegrityError)
    with pytest.raises(IntegrityError, match="failure 4"):
        await retry(fn, "x")
    assert fn.calls == FAST.attempts


def test_no_retry_machinery_is_imported_until_a_retry() -> None:
    """tenacity (and the tornado it pulls in when installed) is start-up time
    a run without a retry never needs."""
    import subprocess
    import sys

    code = (
        "import sys, synxfer._retry, synxfer.engine.download, synxfer.engine.compress\n"
        "print('tenacity' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
