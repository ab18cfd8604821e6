"""The user's aws-cli transfer settings: the active profile's ``s3`` section.

aws-cli users tune ``aws s3`` in ``~/.aws/config`` (or ``$AWS_CONFIG_FILE``)::

    [profile fast]
    s3 =
      max_concurrent_requests = 20
      multipart_threshold = 64MB
      multipart_chunksize = 16MB
      max_bandwidth = 50MB/s

The ``synxfer`` command applies them to commands on ``s3://`` and
``scp://`` unless a flag says otherwise:

==========================  ===============================  ================
aws-cli setting             TransferConfig field             flag
==========================  ===============================  ================
``max_concurrent_requests`` ``max_threads``                  ``--max-threads``
``multipart_threshold``     ``multipart_threshold``          (none)
``multipart_chunksize``     ``part_size``                    ``--part-size``
``max_bandwidth``           ``bwlimit``                      ``--bwlimit``
==========================  ===============================  ================

Sizes read as aws-cli reads them: binary units (``MB`` is MiB, ``KB`` is
KiB), see :func:`synxfer.parse_size`; a rate is bytes per second, ``10MB/s``,
or bits with a lowercase ``b`` (``80Mb/s``), see :func:`synxfer.parse_rate`.
The active profile is ``--profile``, else ``$AWS_PROFILE``, else
``default``. Other keys of the section (``addressing_style``,
``use_accelerate_endpoint``, ...) are the S3 backend's business or ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from .._exceptions import ConfigError
from .._units import parse_rate, parse_size

__all__ = ["AWS_S3_SETTINGS", "active_profile", "aws_config_path", "read_s3_settings"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be a positive integer")
    return value


#: aws-cli's name -> (TransferConfig field, parser).
AWS_S3_SETTINGS: dict[str, tuple[str, Callable[[str], int]]] = {
    "max_concurrent_requests": ("max_threads", _positive_int),
    "multipart_threshold": ("multipart_threshold", parse_size),
    "multipart_chunksize": ("part_size", parse_size),
    "max_bandwidth": ("bwlimit", parse_rate),
}


def aws_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$AWS_CONFIG_FILE``, else ``~/.aws/config``."""
    env = os.environ if env is None else env
    return Path(env.get("AWS_CONFIG_FILE") or "~/.aws/config").expanduser()


def active_profile(profile: str | None, env: Mapping[str, str] | None = None) -> str:
    """``profile``, else ``$AWS_PROFILE`` (or ``$AWS_DEFAULT_PROFILE``), else ``default``."""
    env = os.environ if env is None else env
    return profile or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"


def read_s3_settings(
    profile: str | None = None, env: Mapping[str, str] | None = None
) -> dict[str, int]:
    """The active profile's ``s3`` settings as TransferConfig fields (``max_threads`` ...).

    Nothing (an empty dict) when the file, the profile or its ``s3`` section
    is missing: an unknown profile is reported by the backend that needs
    it. A value that cannot be read is a :class:`~synxfer.ConfigError`
    naming the file, the profile and the setting.
    """
    path = aws_config_path(env)
    name = active_profile(profile, env)
    if not os.path.isfile(path):
        return {}
    import configparser  # only when there is a file to read: start-up pays for it

    parser = configparser.RawConfigParser(default_section="synxfer-no-default-section")
    try:
        read = parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the AWS config file {path}: {_parse_error(exc)}; fix it, or point "
            "AWS_CONFIG_FILE at another file"
        ) from None
    if not read:
        return {}
    sections = [f"profile {name}", name] if name == "default" else [f"profile {name}"]
    section = next((s for s in sections if parser.has_section(s)), None)
    if section is None:
        return {}
    raw = parser.get(section, "s3", fallback=None)
    if raw is None:
        return {}
    settings: dict[str, int] = {}
    for line in raw.splitlines():
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in AWS_S3_SETTINGS:
            continue
        field, parse = AWS_S3_SETTINGS[key]
        try:
            settings[field] = parse(value)
        except ValueError as exc:
            raise ConfigError(
                f"{path}: [{section}] s3.{key} = {value!r} cannot be used: {exc}"
            ) from None
    return settings


def _parse_error(exc: Exception) -> str:
    """What is wrong with the file, in one line: configparser's messages
    span several and name the parser's internals."""
    import configparser

    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"line {exc.lineno}: {exc.line.strip()!r} comes before any [section] header"
    if isinstance(exc, configparser.ParsingError) and exc.errors:
        import ast

        lineno, shown = exc.errors[0]  # the line as repr() shows it
        try:
            line = str(ast.literal_eval(shown)).strip()
        except (ValueError, SyntaxError):
            line = str(shown)
        return f"line {lineno}: {line!r} is not 'name = value'"
    return " ".join(str(exc).split())
