"""webapp/sessions.py (issue 54): the signing key is the server's own, files folders of no library go at start,
and a batch of uploads a stopped server never stored is named once on the next visit."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from webapp.sessions import KEY_FILE, SessionStore, server_key

ROOT = Path(__file__).resolve().parent.parent


def store(tmp_path, **kw) -> SessionStore:
    return SessionStore(tmp_path, lambda root: None, closer=lambda p: None, **kw)


def test_the_signing_key_is_made_once_private_and_kept(tmp_path):
    key = server_key(tmp_path)
    f = tmp_path / KEY_FILE
    assert len(key) == 64 and f.stat().st_mode & 0o777 == 0o600
    assert server_key(tmp_path) == key  # kept: ids survive a restart
    assert server_key(tmp_path / "other") != key


def test_ids_signed_with_another_key_are_not_issued_but_a_library_on_disk_stays_its_owner_s(tmp_path):
    """After the key change (the browser state's key, public, signed ids before): an id the old key signed is
    refused unless it names a library already on disk, which keeps working."""
    old = store(tmp_path, secret="the browser state's key")
    kept, unused = old.new_id(), old.new_id()
    (old.library_dir(kept)).mkdir(parents=True)
    new = store(tmp_path, secret=server_key(tmp_path))
    assert new.issued(kept) and not new.issued(unused)
    assert new.issued(new.new_id())


def test_files_folders_of_no_library_are_swept_at_start(tmp_path):
    s = store(tmp_path, secret="k1")
    sid = s.new_id()
    s.library_dir(sid).mkdir(parents=True)
    mine = s.files_dir(sid) / "pages" / "x" / "page.png"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"png")
    stray = s.files_root / ("0" * 32) / "runs" / "r" / "submission.csv"
    stray.parent.mkdir(parents=True)
    stray.write_text("x")
    assert s.sweep_files() == 1 and mine.exists() and not stray.exists()
    # the key changed: the folder named by the old key goes (its files are shown copies, made again)
    assert store(tmp_path, secret="k2").sweep_files() == 1 and not mine.exists()
    shared = store(tmp_path / "shared", secret="k", shared=True)
    (shared.files_dir("x") / "a").mkdir(parents=True)
    assert shared.sweep_files() == 0 and (shared.files_dir("x") / "a").exists()


def test_an_earlier_process_s_indexing_record_names_what_it_never_stored_once(tmp_path):
    s = store(tmp_path, secret="k")
    sid = s.new_id()
    rec = s.begin_indexing(sid, ["a.pdf", "b.pdf", "c.pdf"])
    s.indexing_left(rec, ["b.pdf", "c.pdf"])
    assert s.interrupted(sid) == []  # this process's: still being indexed
    # the same record left by another process (killed): read in a child, whose process name differs
    code = ("import sys; from webapp.sessions import SessionStore as S; "
            f"print(S({str(tmp_path)!r}, lambda r: None, secret='k').interrupted({sid!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['b.pdf', 'c.pdf']"
    assert not rec.exists()  # said once
    again = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.stdout.strip() == "[]"
    # a batch that ends leaves nothing to say
    s.end_indexing(s.begin_indexing(sid, ["d.pdf"]))
    assert os.listdir(s.session_dir(sid) / "indexing") == []
    assert s.interrupted("not an id") == []
