# SPDX-License-Identifier: MIT
"""kvblk's exceptions: every error the library reports is a kvblk.Error (an OSError)."""

import errno as _errno


class Error(OSError):
    """A libkvblk call failed, or an object of a batch failed.

    Attributes (besides OSError's):
      errno     -- the positive errno value (``e.errno == errno.EINVAL``).
      strerror  -- what failed and why: the call's name and libkvblk's kvblk_last_error() text,
                   e.g. ``"kvblk_load_many: descriptor 3: offset 4097 is not a multiple of the
                   logical block size 4096"``.
      bad_index -- the descriptor the error is about: the rejected descriptor of a batch
                   (kvblk_batch_info.bad_index), the first failed object when a batch completed
                   with failures, the entry whose destination could not be used; -1 otherwise.
      batch     -- for per-object failures (check=True), the kvblk.Batch with every status;
                   None otherwise.
      results   -- for a rejected batch, the RESULT_DTYPE array the library filled (the bad
                   descriptor's reason, -ECANCELED for the others); None otherwise.

    One class for every errno keeps handling simple: test ``e.errno``. The one subclass is
    WaitTimeout (a wait that ran out of time), which is also a built-in TimeoutError.
    """

    def __init__(self, errno, strerror, bad_index=-1):
        super().__init__(errno, strerror)
        self.bad_index = bad_index
        self.batch = None
        self.results = None

    def __reduce__(self):
        return (type(self), (self.errno, self.strerror, self.bad_index))


class WaitTimeout(Error, TimeoutError):
    """Ticket.wait() or Device.wait_all() ran out of time; errno is ETIME. The batch stays
    outstanding: wait again, cancel it, or let close() finish it."""

    def __init__(self, strerror, bad_index=-1):
        super().__init__(_errno.ETIME, strerror, bad_index)

    def __reduce__(self):
        return (type(self), (self.strerror, self.bad_index))
