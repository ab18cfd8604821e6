"""Servers, emulators and proxies on 127.0.0.1 for synxfer's tests and benchmarks.

Not part of the ``synxfer`` library (its wheel does not carry them): this
package ships in the ``synxfer-bench`` distribution (``benchmarks/``), which
both the test suite and the ``synxfer-bench`` harness import.

* :mod:`.s3` -- moto S3 servers: in a thread (:func:`~.s3.moto_server`), in a
  subprocess (:class:`~.s3.MotoProcess`), counting concurrent requests
  (:func:`~.s3.counting_moto_server`); all verify ``Content-MD5`` as S3 does.
* :mod:`.gcs` -- ``gcp-storage-emulator`` in a subprocess and
  :class:`~.gcs.GcsFront`, which makes it act like GCS.
* :mod:`.faultproxy` -- an HTTP proxy that injects faults (5xx, resets,
  truncation, stalls, trickles) in front of a server.
* :mod:`.delayproxy` -- userspace network emulation: TCP proxies with delay
  and bandwidth caps, and an emulated multi-site network.
* :mod:`.blockd` -- ``synxfer-blockd`` block-store sites as child processes.
* :mod:`.process` -- the child-process helpers they share (start, read a
  line, stop politely then by force; CPU time and peak RSS of a child).

Everything binds 127.0.0.1 and nothing here sets environment variables.
``python -m synxfer_servers._moto_main`` and ``python -m
synxfer_servers.delayproxy`` are the child processes of :class:`~.s3.MotoProcess`
and :class:`~.delayproxy.NetworkProcess`.
"""
