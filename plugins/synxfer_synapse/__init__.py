"""synxfer's Synapse backend (``syn://syn123/path``): Projects, Folders and Files
through Synapse's REST API and pre-signed URLs.

See :mod:`synxfer_synapse._backend` for what maps to what,
:mod:`synxfer_synapse._options` for the token, endpoints and threads (read as
synapseclient reads them), :mod:`synxfer_synapse._core` for the REST calls
and their errors, and docs/synapse.md. Install with
``pip install 'synxfer[synapse]'``.
"""

from ._backend import MIN_PART_SIZE, SynapseBackend, SynapseVendor
from ._options import PRODUCTION_ENDPOINTS, SynapseSettings, load_settings

__all__ = [
    "MIN_PART_SIZE",
    "PRODUCTION_ENDPOINTS",
    "SynapseBackend",
    "SynapseSettings",
    "SynapseVendor",
    "load_settings",
]
