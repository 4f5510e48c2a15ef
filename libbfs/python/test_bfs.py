"""The test of the Python binding: run by libbfs's Go test against a
running cluster (BFS_NAMESERVER, BFS_TEST_ROOT), with the library in
$LIBBFS."""

import os
import threading
import unittest

import bfs

NAMESERVER = os.environ["BFS_NAMESERVER"]
ROOT = os.environ["BFS_TEST_ROOT"]


def connect(holder, user=None):
    return bfs.FileSystem(NAMESERVER, holder=holder, session_ttl=3, user=user)


class FilesTest(unittest.TestCase):
    def test_put_get(self):
        with connect("py-files") as fs:
            d = ROOT + "/files"
            fs.mkdir(d, parents=True)
            data = bytes(range(256)) * 5000
            with fs.create(d + "/f") as f:
                f.write(data[:1000])
                f.sync()
                f.write(data[1000:])
                self.assertEqual(f.tell(), len(data))
            self.assertEqual(fs.stat(d + "/f")["size"], len(data))
            with fs.open(d + "/f") as f:
                self.assertEqual(f.read(), data)
                self.assertEqual(f.pread(10, 300000), data[300000:300010])
                self.assertEqual(f.seek(5), 5)
                self.assertEqual(f.read(3), data[5:8])
            self.assertEqual([name for name, _ in fs.listdir(d)], ["f"])
            fs.rename(d + "/f", d + "/g")
            self.assertFalse(fs.exists(d + "/f"))
            fs.remove(d + "/g")
            self.assertEqual(fs.holder(), "py-files")

    def test_bad_calls_raise(self):
        with connect("py-bad") as fs:
            with self.assertRaises(bfs.BfsError) as e:
                fs.stat("relative")
            self.assertEqual(e.exception.code, bfs.ERR_INVALID_ARGUMENT)
            with self.assertRaises(bfs.BfsError) as e:
                fs.open(ROOT + "/missing")
            self.assertEqual(e.exception.name, "BFS_ERR_NOT_FOUND")
            self.assertIn("/missing", e.exception.message)
        with self.assertRaises(bfs.BfsError) as e:
            fs.stat("/")
        self.assertEqual(e.exception.code, bfs.ERR_BAD_HANDLE)


class LocksTest(unittest.TestCase):
    def test_failover(self):
        with connect("py-a") as a, connect("py-master", user="admin") as master, connect("py-b") as b:
            d = ROOT + "/tablet"
            master.mkdir(d, parents=True)
            lock = a.lock(d)
            self.assertGreater(lock.epoch, 0)
            lost = threading.Event()
            why = []
            lock.on_lost(lambda w: (why.append(w), lost.set()))
            with self.assertRaises(bfs.BfsError) as e:
                b.lock(d, wait=0.2)
            self.assertEqual(e.exception.code, bfs.ERR_TIMEOUT)
            self.assertEqual(master.lock_status(d)["holder"], "py-a")
            with self.assertRaises(bfs.BfsError) as e:
                b.unlock_dir(d, force=True)
            self.assertEqual(e.exception.code, bfs.ERR_PERMISSION_DENIED)

            self.assertEqual(master.unlock_dir(d, force=True, wait=10), bfs.UNLOCKED)
            self.assertTrue(lost.wait(10))
            self.assertTrue(why[0])
            self.assertFalse(lock.held())
            with self.assertRaises(bfs.BfsError) as e:
                a.mkdir(d + "/x")
            self.assertEqual(e.exception.code, bfs.ERR_STALE_EPOCH)

            lb = b.lock(d, wait=5)
            self.assertGreater(lb.epoch, lock.epoch)
            lb.unlock()
            lock.unlock()


if __name__ == "__main__":
    unittest.main()
