"""iw_cxgb4's debugfs files: one ``cat`` of several split back into each file by its lines."""

from __future__ import annotations

from hil.agent.types import CommandResult
from hil.host import hwdebugfs

DIR = "/sys/kernel/debug/iw_cxgb4/0000:81:00.4"
QP = "rc qp sq id 1028 rq id 1029 state 1 onchip 0 ep tid 8215 state 7"
LISTENER = "ep 00000000c0ffee00 stid 3 state 1 flags 0x0 198.18.1.2:20560"
STAG = "stag: idx 0x1 valid 1 key 0x0 state 1 pdid 0x1 perm 0x0 ps 0 len 0x0 va 0x0"


def test_each_line_goes_to_the_file_its_first_words_belong_to() -> None:
    out = f"{QP}\n\0{LISTENER}\n{STAG}\0\n   Object: Total Current\n     PDID: 65536 1\n\n"
    found = hwdebugfs.split_debugfs(DIR, CommandResult(("cat",), 0, out, ""), hwdebugfs.FILES)
    assert found.files == {
        "qps": f"{QP}\n",
        "eps": f"{LISTENER}\n",
        "stags": f"{STAG}\n",
        "stats": "   Object: Total Current\n     PDID: 65536 1\n",
    }
    assert (found.qps, found.eps, found.listeners, found.unreadable) == (1, 1, 1, {})


def test_a_file_cat_could_not_read_is_unreadable_and_gets_no_lines() -> None:
    err = f"cat: {DIR}/stags: No such file or directory\n"
    found = hwdebugfs.split_debugfs(DIR, CommandResult(("cat",), 1, f"{STAG}\n", err), ("stags",))
    assert found.unreadable == {"stags": "No such file or directory"}
    assert found.files == {} and found.qps is None and found.listeners is None
