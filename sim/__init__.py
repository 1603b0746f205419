"""kernelsim: a what-if simulator for GPU kernel decisions (package `sim`)."""

__version__ = "0.1.0"
