"""The runtime's command-line fields, without torch: what ``--device --precision --channels-last
--torch-threads`` are and their defaults, for every command.

:class:`~proclab.run.runtime.RuntimeConfig` adds the :class:`~proclab.run.runtime.Runtime` they describe;
a command whose ``--help`` must load no torch (``proclab quickstart``) inherits these fields alone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class RuntimeFlags:
    """Where and how a command computes: the fields every command that computes with torch shares.

    Commands' argument dataclasses inherit them (through :class:`~proclab.run.runtime.RuntimeConfig`), so
    the flags stay flat and alike everywhere, and saved configs keep their keys. No command redeclares
    them: one whose results are compared in fp32 says so in its help, and the user passes
    ``--precision fp32``.
    """

    device: str = "auto"
    """Torch device: auto (cuda if available), cpu, cuda, cuda:1, ..."""
    precision: str = "auto"
    """Arithmetic: bf16 (autocast), fp32, or auto (bf16 where the hardware has it)."""
    channels_last: bool = True
    """NHWC convolutions (about twice as fast as NCHW on CPU; also the tensor-core layout on GPUs)."""
    torch_threads: int = 0
    """Torch intra-op threads (0 = torch's default)."""
