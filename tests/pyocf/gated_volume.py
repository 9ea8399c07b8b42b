"""A pyocf RAM volume that can hold back a write OCF sends it.

OCF gives a volume an IO as a forward token and the IO completes when the
volume ends the token, so keeping the token is how a test keeps a request
in flight (and its cache-line locks held) for as long as it needs, with
no timing involved.
"""
from ctypes import c_void_p
from ctypes import cast
from ctypes import string_at
import threading

from pyocf.ocf import OcfLib
from pyocf.types.data import Data
from pyocf.types.io import IoDir
from pyocf.types.volume import RamVolume


def forwarded_bytes(token, offset, nbytes):
    """The data of a forwarded IO."""
    data = cast(OcfLib.getInstance().ocf_forward_get_data(token), c_void_p)
    return string_at(Data.get_instance(data.value).handle.value + offset,
                     nbytes)


class GatedVolume(RamVolume):
    """RamVolume that keeps one chosen write in flight until release()."""

    def __init__(self, size):
        super().__init__(size)
        self._lock = threading.Lock()
        self._wanted = None
        self._held = None
        self.held = threading.Event()

    def hold_write_of(self, payload):
        """Keep the next write of exactly these bytes in flight.

        Other writes (a read's backfill, metadata) go through.
        """
        with self._lock:
            assert self._held is None, "a write is already held"
            self._wanted = bytes(payload)
            self.held.clear()

    def release(self):
        """Carry out the held write and complete it to OCF."""
        with self._lock:
            args, self._held = self._held, None
        assert args is not None, "no write is held"
        super().do_forward_io(*args)

    def release_any(self):
        """Complete a held write if there is one and hold nothing more."""
        with self._lock:
            self._wanted = None
            held = self._held is not None
        if held:
            self.release()

    def do_forward_io(self, token, rw, addr, nbytes, offset):
        with self._lock:
            hold = (self._wanted is not None and rw == IoDir.WRITE and
                    nbytes == len(self._wanted) and
                    forwarded_bytes(token, offset, nbytes) == self._wanted)
            if hold:
                self._wanted = None
                self._held = (token, rw, addr, nbytes, offset)
        if hold:
            self.held.set()
            return
        super().do_forward_io(token, rw, addr, nbytes, offset)
