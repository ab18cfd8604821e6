"""The ``synxfer`` command line (:mod:`.main`); ``synxfer-bench`` lives in ``benchmarks/``."""
