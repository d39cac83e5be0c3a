"""Raw writes past the page cache (corpus.direct_io) and the HDF5 stores built on them: every byte lands where it
belongs, whether the blocks go direct, the platform has no O_DIRECT, or the file system refuses it."""

import errno
import os

import h5py
import numpy as np
import pytest
from elmo_keras.host_memory import host_zeros
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo_keras.corpus import direct_io, layout
from elmo_keras.corpus.assembly import HDF5Assembly, adjacent_runs
from elmo_keras.corpus.direct_io import BLOCK, RawWriter
from elmo_keras.corpus.readers import HDF5Embeddings, ShardedEmbeddings

SENTINEL = 0xA5


def _file(path, size):
    path.write_bytes(bytes([SENTINEL]) * size)
    return str(path)


def _staged(data: bytes, lead: int) -> np.ndarray:
    """``data`` in a page-aligned buffer, starting ``lead`` bytes after a block boundary."""
    buffer = host_zeros((lead + len(data),), np.uint8)
    buffer[lead:] = np.frombuffer(data, np.uint8)
    return buffer[lead:]


def _check_write(path, offset, data, lead):
    size = offset + len(data) + 2 * BLOCK
    name = _file(path, size)
    with RawWriter(name) as writer:
        writer.write(offset, _staged(data, lead))
    expected = bytearray([SENTINEL]) * size
    expected[offset : offset + len(data)] = data
    assert path.read_bytes() == bytes(expected)


@settings(max_examples=60, deadline=None)
@given(
    offset=st.integers(0, 3 * BLOCK),
    size=st.integers(0, 5 * BLOCK),
    congruent=st.booleans(),
    lead=st.integers(0, BLOCK - 1),
    seed=st.integers(0, 2**16),
)
def test_raw_writer_puts_every_byte_at_its_offset(tmp_path_factory, offset, size, congruent, lead, seed):
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path_factory.mktemp("raw") / "f.bin"
    _check_write(path, offset, data, offset % BLOCK if congruent else lead)


def test_whole_blocks_go_direct_and_the_edges_through_the_page_cache(tmp_path, monkeypatch):
    name = _file(tmp_path / "f.bin", 8 * BLOCK)
    writer = RawWriter(name)
    if writer._direct is None:
        writer.close()
        pytest.skip("this file system refuses O_DIRECT (the fallback is tested below)")
    calls = []
    real = direct_io._pwrite_all
    monkeypatch.setattr(
        direct_io,
        "_pwrite_all",
        lambda fd, data, offset: (calls.append((fd, len(data), offset)), real(fd, data, offset)),
    )
    offset = BLOCK - 100
    data = os.urandom(100 + 3 * BLOCK + 7)
    writer.write(offset, _staged(data, offset % BLOCK))
    direct, buffered = writer._direct, writer._fd
    writer.close()
    assert calls == [(direct, 3 * BLOCK, BLOCK), (buffered, 100, offset), (buffered, 7, 4 * BLOCK)]
    assert (tmp_path / "f.bin").read_bytes()[offset : offset + len(data)] == data


def test_without_o_direct_everything_is_written_normally(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "O_DIRECT", raising=False)  # macOS
    with RawWriter(_file(tmp_path / "g.bin", 4 * BLOCK)) as writer:
        assert writer._direct is None
    _check_write(tmp_path / "f.bin", BLOCK, os.urandom(3 * BLOCK), 0)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="the platform has no O_DIRECT")
def test_a_file_system_that_refuses_o_direct_falls_back(tmp_path, monkeypatch):
    real_open, real_pwrite = os.open, os.pwrite
    direct_fds = []

    def refusing_open(path, flags, *args):  # opening with O_DIRECT fails, as on tmpfs before Linux 6.6
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing_open)
    _check_write(tmp_path / "a.bin", 0, os.urandom(3 * BLOCK + 5), 0)
    monkeypatch.setattr(os, "open", real_open)

    def refusing_pwrite(fd, data, offset):  # opening works, the write fails (some FUSE file systems)
        if fd in direct_fds:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    name = _file(tmp_path / "b.bin", 6 * BLOCK)
    data = os.urandom(2 * BLOCK)
    with RawWriter(name) as writer:
        if writer._direct is None:
            pytest.skip("this file system refuses O_DIRECT already at open (tested above)")
        direct_fds.append(writer._direct)
        monkeypatch.setattr(os, "pwrite", refusing_pwrite)
        writer.write(BLOCK, _staged(data, 0))
        writer.write(3 * BLOCK, _staged(data, 0))
        assert writer._direct is None
    assert (tmp_path / "b.bin").read_bytes()[BLOCK : 5 * BLOCK] == data + data


def test_adjacent_runs():
    starts = [100, 110, None, 130, 500, None, 510, 513, 613]
    sizes = [10, 20, 0, 5, 10, 0, 3, 100, 1]
    assert adjacent_runs(starts, sizes, 1000) == [(100, [0, 1, 3]), (500, [4, 6, 7, 8])]
    # at most max_bytes per run, unless one dataset is larger
    assert adjacent_runs(starts, sizes, 30) == [(100, [0, 1]), (130, [3]), (500, [4, 6]), (513, [7]), (613, [8])]
    assert adjacent_runs([], [], 10) == [] and adjacent_runs([None], [0], 10) == []


def _lines(rng, dtype, width, count, layers=3):
    """Per-line arrays as the embedder yields them: views into padded batch arrays, some of them empty."""
    batch = rng.standard_normal((count, layers, 11, width)).astype(np.float32)
    return [batch[j, :, : int(n)] for j, n in enumerate(rng.integers(0, 12, count))]


@pytest.mark.parametrize("dtype, width", [("float32", 256), ("float16", 24), ("float32", 7)])
def test_shards_and_hdf5_assembly_read_back_exactly(tmp_path, dtype, width):
    rng = np.random.default_rng(0)
    shard_lines, shards = 40, 3
    lines = [_lines(rng, dtype, width, shard_lines) for _ in range(shards)]
    manifest = {
        "format": layout.FORMAT_NAME,
        "version": layout.FORMAT_VERSION,
        "complete": True,
        "input": {"lines": shard_lines * shards},
        "layers": "all",
        "storage_dtype": dtype,
        "output_format": "hdf5",
        "shard_lines": shard_lines,
        "shards": shards,
    }
    for k, arrays in enumerate(lines):
        layout.write_shard(str(tmp_path / layout.shard_name(k)), arrays, k * shard_lines, dtype)
        with h5py.File(tmp_path / layout.shard_name(k), "r") as f:
            assert f["values"].id.get_offset() % BLOCK == 0
    assembly = HDF5Assembly(str(tmp_path), manifest)
    assembly.write_bytes = 20_000  # several writes per shard
    for k in (2, 0):  # in any order; the rest from the shard files
        assembly.add(k, lines[k])
    assembly.add_committed()
    built = assembly.finish({})
    expected = [a.astype(dtype) for arrays in lines for a in arrays]
    data_bytes = sum(a.nbytes for a in expected)
    assert os.path.getsize(built) < data_bytes + 600 * len(expected) + 64_000  # no big unused metadata block
    with ShardedEmbeddings(str(tmp_path), manifest) as shards_read, HDF5Embeddings(built) as hdf5_read:
        for i, array in enumerate(expected):
            for got in (shards_read[i], hdf5_read[i]):
                assert got.shape == array.shape and np.array_equal(got, array.astype(np.float32)), i
