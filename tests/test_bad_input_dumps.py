"""Bad input, round four: a dump under other names and packings (``Posts.xml.gz`` as docs/reproduce.md
promises, ``posts-2021.xml``, a ``.zip`` or ``.tar.gz`` dump) reads the same questions as the plain folder,
and an archive renamed ``.7z`` is recorded under the format its bytes hold (issue 34)."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from test_retrieval_eval import small_config, write_site

from graphctx.cli import main


def summary(source: Path, tmp_path: Path, capsys) -> tuple[dict, str]:
    """``graphctx data``'s JSON line and its table, or the error line when it fails."""
    status = main(["data", str(source), "--config", str(small_config(tmp_path, source)), "--no-token-limit"])
    captured = capsys.readouterr()
    assert status == 0 and "Traceback" not in captured.err, captured.err[-2000:]
    return json.loads(captured.out.strip().splitlines()[-1]), captured.out


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return write_site(tmp_path / "site")


def gzipped(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(source.read_bytes()))
    return target


def test_posts_xml_gz_a_folder_of_gz_files_and_another_name_read_the_plain_dump(site, tmp_path, capsys):
    plain, _ = summary(site, tmp_path, capsys)
    given = gzipped(site / "Posts.xml", tmp_path / "given" / "Posts.xml.gz")
    shutil.copy(site / "PostLinks.xml", given.parent / "PostLinks.xml")
    packed = tmp_path / "packed"
    gzipped(site / "Posts.xml", packed / "Posts.xml.gz")
    gzipped(site / "PostLinks.xml", packed / "PostLinks.xml.gz")
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    shutil.copy(site / "Posts.xml", renamed / "posts-2021.xml")
    shutil.copy(site / "PostLinks.xml", renamed / "PostLinks.xml")
    for source in (given, packed, renamed / "posts-2021.xml"):
        found, _ = summary(source, tmp_path, capsys)
        assert (found["kept"], found["train"], found["test"]) == (
            plain["kept"],
            plain["train"],
            plain["test"],
        )
    assert [f["name"] for f in summary(packed, tmp_path, capsys)[0]["manifest"]["files"]] == [
        "PostLinks.xml.gz",
        "Posts.xml.gz",
    ]
    assert plain["removed_linked_duplicate"] == 1  # PostLinks.xml read, beside each of them too


def zip_of(site: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for name in ("Posts.xml", "PostLinks.xml"):
            archive.write(site / name, f"site/{name}")
    return target


def tar_of(site: Path, target: Path) -> Path:
    with tarfile.open(target, "w:gz") as archive:
        for name in ("Posts.xml", "PostLinks.xml"):
            archive.add(site / name, f"site/{name}")
    return target


@pytest.mark.parametrize(
    ("pack", "name", "format"),
    [
        (zip_of, "site.zip", "zip"),
        (tar_of, "site.tar.gz", "tar+gzip"),
        (zip_of, "renamed.7z", "zip"),
        (tar_of, "renamed-tar.7z", "tar+gzip"),
    ],
)
def test_zip_and_tar_dumps_are_read_and_the_manifest_names_their_real_format(
    site, tmp_path, capsys, pack, name, format
):
    plain, _ = summary(site, tmp_path, capsys)
    found, table = summary(pack(site, tmp_path / name), tmp_path, capsys)
    assert (found["kept"], found["removed_linked_duplicate"]) == (plain["kept"], 1)
    manifest = found["manifest"]
    assert manifest["archive"]["format"] == format and f"{name}  " in table and f"({format})" in table
    assert {f["compression"] for f in manifest["files"]} == {format}
