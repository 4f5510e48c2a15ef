"""A ctypes binding of libbfs, the C API of BFS-Go (libbfs/bfs.h).

The same calls as bfs.h, in Python shape: a failing call raises BfsError
carrying the bfs.h status code and the library's message; handles are
objects that close themselves in a with block; strings the library
returns are copied and freed at once. Every call releases the GIL while
the library works, so threads run concurrently as they do in C.

    fs = bfs.FileSystem("127.0.0.1:8828", holder="ts-1")
    with fs.create("/t/f") as f:
        f.write(b"hello")
    lock = fs.lock("/t", wait=10.0)
    lock.on_lost(lambda why: print("lost:", why))
    ...
    lock.unlock()
    fs.close()

The library is loaded from $LIBBFS, else by the name libbfs.so (see
scripts/libbfs.sh).
"""

import ctypes
import os
import threading

# Status codes of bfs.h.
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_BAD_HANDLE = 2
ERR_NOT_FOUND = 3
ERR_EXISTS = 4
ERR_NOT_DIRECTORY = 5
ERR_IS_DIRECTORY = 6
ERR_NOT_EMPTY = 7
ERR_PERMISSION_DENIED = 8
ERR_LOCKED = 9
ERR_UNLOCKED = 10
ERR_CLEANING = 11
ERR_STALE_EPOCH = 12
ERR_LOCK_LOST = 13
ERR_SESSION_EXPIRED = 14
ERR_SEALED = 15
ERR_NOT_OPEN = 16
ERR_NOT_LEADER = 17
ERR_UNAVAILABLE = 18
ERR_TIMEOUT = 19
ERR_CLOSED = 20
ERR_CORRUPT = 21
ERR_UNIMPLEMENTED = 22
ERR_INTERNAL = 23
ERR_UNKNOWN = 24
ERR_RESOURCE_EXHAUSTED = 25

# Directory lock states.
UNLOCKED, LOCKED, CLEANING = 0, 1, 2

_fs_t = _file_t = _lock_t = ctypes.c_uint64


class _Options(ctypes.Structure):
    _fields_ = [
        ("nameservers", ctypes.c_char_p),
        ("holder", ctypes.c_char_p),
        ("session_ttl_ms", ctypes.c_int64),
        ("call_timeout_ms", ctypes.c_int64),
        ("certs_dir", ctypes.c_char_p),
        ("user", ctypes.c_char_p),
        ("insecure", ctypes.c_int),
    ]


class _FileInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_int64),
        ("mtime_ns", ctypes.c_int64),
        ("entry_id", ctypes.c_uint64),
        ("lock_epoch", ctypes.c_uint64),
        ("mode", ctypes.c_uint32),
        ("is_dir", ctypes.c_int32),
        ("replication", ctypes.c_int32),
        ("lock_status", ctypes.c_int32),
        ("open_for_write", ctypes.c_int32),
    ]


class _Dirent(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("info", _FileInfo)]


class _LockInfo(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_int32),
        ("epoch", ctypes.c_uint64),
        ("holder", ctypes.c_char_p),
        ("session_id", ctypes.c_char_p),
        ("since_ns", ctypes.c_int64),
        ("pending_files", ctypes.c_size_t),
    ]


_LOST_FN = ctypes.CFUNCTYPE(None, _lock_t, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

_P = ctypes.POINTER
_SIGNATURES = {
    "bfs_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "bfs_last_error_message": (ctypes.c_char_p, []),
    "bfs_free": (None, [ctypes.c_void_p]),
    "bfs_fs_open": (ctypes.c_int, [_P(_Options), _P(_fs_t)]),
    "bfs_fs_close": (ctypes.c_int, [_fs_t]),
    "bfs_fs_holder": (ctypes.c_int, [_fs_t, _P(ctypes.c_void_p)]),
    "bfs_mkdir": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int]),
    "bfs_remove": (ctypes.c_int, [_fs_t, ctypes.c_char_p]),
    "bfs_rmdir": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_int]),
    "bfs_rename": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_char_p]),
    "bfs_chmod": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_uint32]),
    "bfs_stat": (ctypes.c_int, [_fs_t, ctypes.c_char_p, _P(_FileInfo)]),
    "bfs_list": (ctypes.c_int, [_fs_t, ctypes.c_char_p, _P(_P(_Dirent)), _P(ctypes.c_size_t)]),
    "bfs_dirents_free": (None, [_P(_Dirent), ctypes.c_size_t]),
    "bfs_create": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_int, _P(_file_t)]),
    "bfs_open": (ctypes.c_int, [_fs_t, ctypes.c_char_p, _P(_file_t)]),
    "bfs_write": (ctypes.c_int, [_file_t, ctypes.c_char_p, ctypes.c_size_t]),
    "bfs_sync": (ctypes.c_int, [_file_t]),
    "bfs_read": (ctypes.c_int, [_file_t, ctypes.c_void_p, ctypes.c_size_t, _P(ctypes.c_size_t)]),
    "bfs_pread": (ctypes.c_int, [_file_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64, _P(ctypes.c_size_t)]),
    "bfs_seek": (ctypes.c_int, [_file_t, ctypes.c_int64, ctypes.c_int, _P(ctypes.c_int64)]),
    "bfs_tell": (ctypes.c_int, [_file_t, _P(ctypes.c_int64)]),
    "bfs_file_size": (ctypes.c_int, [_file_t, _P(ctypes.c_int64)]),
    "bfs_close": (ctypes.c_int, [_file_t]),
    "bfs_lock_dir": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_int64, _P(_lock_t)]),
    "bfs_lock_epoch": (ctypes.c_int, [_lock_t, _P(ctypes.c_uint64)]),
    "bfs_lock_poll": (ctypes.c_int, [_lock_t]),
    "bfs_lock_on_lost": (ctypes.c_int, [_lock_t, _LOST_FN, ctypes.c_void_p]),
    "bfs_unlock": (ctypes.c_int, [_lock_t]),
    "bfs_unlock_dir": (ctypes.c_int, [_fs_t, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, _P(ctypes.c_int)]),
    "bfs_lock_status": (ctypes.c_int, [_fs_t, ctypes.c_char_p, _P(_LockInfo)]),
    "bfs_lock_info_free": (None, [_P(_LockInfo)]),
}


def _load():
    lib = ctypes.CDLL(os.environ.get("LIBBFS") or "libbfs.so")
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


_lib = _load()


class BfsError(Exception):
    """A call failed: code is its bfs.h status code, name the code's name
    ("BFS_ERR_LOCKED"), message the library's explanation."""

    def __init__(self, code, message):
        self.code = code
        self.name = _lib.bfs_strerror(code).decode().split(":")[0]
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


def _check(code):
    # The message is per thread, and this thread made the call.
    if code != OK:
        raise BfsError(code, _lib.bfs_last_error_message().decode(errors="replace"))


def _path(p):
    return p.encode() if isinstance(p, str) else p


def _wait_ms(wait):
    """None waits without bound, 0 not at all, else seconds."""
    if wait is None:
        return -1
    return int(wait * 1000)


def _info(i):
    return {
        "size": i.size, "mtime_ns": i.mtime_ns, "entry_id": i.entry_id, "mode": i.mode,
        "is_dir": bool(i.is_dir), "replication": i.replication, "lock_status": i.lock_status,
        "lock_epoch": i.lock_epoch, "open_for_write": bool(i.open_for_write),
    }


class FileSystem:
    """A file system handle: a nameserver connection with one session."""

    def __init__(self, nameservers, holder=None, session_ttl=None, call_timeout=None,
                 certs_dir=None, user=None, insecure=False):
        """nameservers: "host:port" or a comma-separated list (a group).
        certs_dir, user, insecure: mutual TLS as bfs_options has it (the
        default finds $BFS_CERTS_DIR or the sandbox's certificates and
        presents the client "bfs"; a force unlock needs an admin user)."""
        o = _Options()
        o.nameservers = _path(nameservers)
        o.holder = _path(holder) if holder else None
        o.certs_dir = _path(certs_dir) if certs_dir else None
        o.user = _path(user) if user else None
        o.insecure = 1 if insecure else 0
        o.session_ttl_ms = int(session_ttl * 1000) if session_ttl else 0
        o.call_timeout_ms = int(call_timeout * 1000) if call_timeout else 0
        h = _fs_t()
        _check(_lib.bfs_fs_open(ctypes.byref(o), ctypes.byref(h)))
        self._h = h.value

    def close(self):
        _check(_lib.bfs_fs_close(self._h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def holder(self):
        p = ctypes.c_void_p()
        _check(_lib.bfs_fs_holder(self._h, ctypes.byref(p)))
        try:
            return ctypes.string_at(p.value).decode()
        finally:
            _lib.bfs_free(p)

    def mkdir(self, path, mode=0, parents=False):
        _check(_lib.bfs_mkdir(self._h, _path(path), mode, 1 if parents else 0))

    def remove(self, path):
        _check(_lib.bfs_remove(self._h, _path(path)))

    def rmdir(self, path, recursive=False):
        _check(_lib.bfs_rmdir(self._h, _path(path), 1 if recursive else 0))

    def rename(self, src, dst):
        _check(_lib.bfs_rename(self._h, _path(src), _path(dst)))

    def chmod(self, path, mode):
        _check(_lib.bfs_chmod(self._h, _path(path), mode))

    def stat(self, path):
        i = _FileInfo()
        _check(_lib.bfs_stat(self._h, _path(path), ctypes.byref(i)))
        return _info(i)

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except BfsError as e:
            if e.code == ERR_NOT_FOUND:
                return False
            raise

    def listdir(self, path):
        """The entries of the directory path: (name, info) pairs, sorted."""
        ents, n = _P(_Dirent)(), ctypes.c_size_t()
        _check(_lib.bfs_list(self._h, _path(path), ctypes.byref(ents), ctypes.byref(n)))
        try:
            return [(ctypes.string_at(ents[i].name).decode(), _info(ents[i].info)) for i in range(n.value)]
        finally:
            _lib.bfs_dirents_free(ents, n)

    def create(self, path, overwrite=False, mode=0, replication=0):
        h = _file_t()
        _check(_lib.bfs_create(self._h, _path(path), 1 if overwrite else 0, mode, replication, ctypes.byref(h)))
        return File(h.value)

    def open(self, path):
        h = _file_t()
        _check(_lib.bfs_open(self._h, _path(path), ctypes.byref(h)))
        return File(h.value)

    def lock(self, path, wait=0):
        """Locks the directory path; wait: 0 fails at once if another holds
        it, seconds waits that long, None without bound."""
        h = _lock_t()
        _check(_lib.bfs_lock_dir(self._h, _path(path), _wait_ms(wait), ctypes.byref(h)))
        return Lock(h.value)

    def unlock_dir(self, path, force=False, wait=0):
        """Unlocks path by its path (force: whoever holds it); returns the
        state it is left in (UNLOCKED or CLEANING)."""
        state = ctypes.c_int()
        _check(_lib.bfs_unlock_dir(self._h, _path(path), 1 if force else 0, _wait_ms(wait), ctypes.byref(state)))
        return state.value

    def lock_status(self, path):
        i = _LockInfo()
        _check(_lib.bfs_lock_status(self._h, _path(path), ctypes.byref(i)))
        try:
            return {
                "status": i.status, "epoch": i.epoch, "since_ns": i.since_ns, "pending_files": i.pending_files,
                "holder": i.holder.decode() if i.holder else None,
                "session_id": i.session_id.decode() if i.session_id else None,
            }
        finally:
            _lib.bfs_lock_info_free(ctypes.byref(i))


class File:
    """A file open for write (FileSystem.create) or for reading (open)."""

    def __init__(self, handle):
        self._h = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def write(self, data):
        _check(_lib.bfs_write(self._h, bytes(data), len(data)))
        return len(data)

    def sync(self):
        _check(_lib.bfs_sync(self._h))

    def read(self, n=-1):
        """Reads n bytes (to the end when n < 0) from the current offset."""
        if n < 0:
            n = max(self.size() - self.tell(), 0)
        buf, got = ctypes.create_string_buffer(n), ctypes.c_size_t()
        _check(_lib.bfs_read(self._h, buf, n, ctypes.byref(got)))
        return buf.raw[: got.value]

    def pread(self, n, offset):
        buf, got = ctypes.create_string_buffer(n), ctypes.c_size_t()
        _check(_lib.bfs_pread(self._h, buf, n, offset, ctypes.byref(got)))
        return buf.raw[: got.value]

    def seek(self, offset, whence=os.SEEK_SET):
        pos = ctypes.c_int64()
        _check(_lib.bfs_seek(self._h, offset, whence, ctypes.byref(pos)))
        return pos.value

    def tell(self):
        pos = ctypes.c_int64()
        _check(_lib.bfs_tell(self._h, ctypes.byref(pos)))
        return pos.value

    def size(self):
        size = ctypes.c_int64()
        _check(_lib.bfs_file_size(self._h, ctypes.byref(size)))
        return size.value

    def close(self):
        _check(_lib.bfs_close(self._h))


class Lock:
    """A directory lock held by the file system's session."""

    def __init__(self, handle):
        self._h = handle
        self._mu = threading.Lock()
        # Every ctypes function ever registered stays alive with the lock:
        # one replaced may still be running.
        self._callbacks = []

    @property
    def epoch(self):
        e = ctypes.c_uint64()
        _check(_lib.bfs_lock_epoch(self._h, ctypes.byref(e)))
        return e.value

    def held(self):
        """True while the lock is held, False once it was lost."""
        code = _lib.bfs_lock_poll(self._h)
        if code == ERR_LOCK_LOST:
            return False
        _check(code)
        return True

    def on_lost(self, fn):
        """Calls fn(why) once, from a thread of the library, if the lock is
        lost; None removes it."""

        def trampoline(_lock, _code, message, _arg):
            try:
                fn(message.decode(errors="replace"))
            except Exception:  # nothing may unwind into the library
                pass

        cb = _LOST_FN(trampoline) if fn else _LOST_FN()
        with self._mu:
            self._callbacks.append(cb)
            _check(_lib.bfs_lock_on_lost(self._h, cb, None))

    def unlock(self):
        """Releases the lock and the handle (see bfs_unlock)."""
        _check(_lib.bfs_unlock(self._h))
