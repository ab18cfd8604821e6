"""Command-line front ends: ``synxfer`` (:mod:`.main`) and ``synxfer-bench`` (:mod:`.bench`)."""
