"""Dumps as people download them: a site's .7z read in place, gzip and HTML Posts.xml named for what they
are, fabricated watermark posts dropped, no answer from the evaluation period in train."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import libarchive
import py7zr
import pytest

from graphctx.cli import main as cli_main
from graphctx.data import DatasetSettings, FilterSettings, SplitSettings, prepare_qa_dataset
from graphctx.data.dumpfiles import site_name
from graphctx.data.links import read_dump_links
from graphctx.data.stackexchange import DumpReader

NO_TOKENS = FilterSettings(max_tokens=None)


def make_7z(target: Path, members: dict[str, Path]) -> Path:
    """A .7z archive (libarchive's writer) holding ``members`` (name in the archive -> file)."""
    with libarchive.file_writer(str(target), "7zip") as archive:
        for name, path in members.items():
            data = path.read_bytes()
            archive.add_file_from_memory(name, len(data), data)
    return target


def dataset(source: Path | str, cache: Path, **split: object):
    settings = DatasetSettings(source=str(source), workers=1, filters=NO_TOKENS, split=SplitSettings(**split))
    return prepare_qa_dataset(settings, cache)


def test_archive_is_read_in_place_like_the_folder(cardano_dir, tmp_path):
    archive = make_7z(
        tmp_path / "cardano.stackexchange.com.7z",
        {name: cardano_dir / name for name in ("Tags.xml", "PostLinks.xml", "Posts.xml")},
    )
    from_folder, folder_summary = dataset(cardano_dir, tmp_path / "a")
    from_archive, summary = dataset(archive, tmp_path / "b")
    for split in ("train", "validation", "test"):
        assert from_archive[split]["id"] == from_folder[split]["id"]
        assert from_archive[split]["answer"] == from_folder[split]["answer"]
    assert set(from_archive["train"]["site"]) == {"cardano"}
    assert not (tmp_path / "b" / "Posts.xml").exists() and not list(tmp_path.rglob("*/Posts.xml"))
    manifest = summary["manifest"]
    assert manifest["archive"]["size"] == archive.stat().st_size
    assert [(f["name"], f["size"], f["sha256"]) for f in manifest["files"]] == [
        (f["name"], f["size"], f["sha256"]) for f in folder_summary["manifest"]["files"]
    ]
    assert manifest["first_post"] <= summary["dump_first"] and manifest["last_post"] >= summary["dump_last"]
    # The cache key covers the archive's size and modification time: a touched archive rebuilds.
    entries = set((tmp_path / "b" / "datasets").iterdir())
    os.utime(archive, ns=(1, 1))
    dataset(archive, tmp_path / "b")
    assert len(set((tmp_path / "b" / "datasets").iterdir()) - entries) == 1


@pytest.mark.parametrize(
    ("name", "site"),
    [("askubuntu.com.7z", "askubuntu"), ("unix.stackexchange.com.7z", "unix"), ("cardano.7z", "cardano")],
)
def test_site_name_of_an_archive(name, site):
    assert site_name(Path(name)) == site


def test_gzip_posts_xml_is_read_and_named_in_the_manifest(cardano_dir, tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "Posts.xml").write_bytes(gzip.compress((cardano_dir / "Posts.xml").read_bytes()))
    shutil.copy(cardano_dir / "PostLinks.xml", folder)
    plain, _ = dataset(cardano_dir, tmp_path / "a")
    zipped, summary = dataset(folder, tmp_path / "b")
    assert zipped["train"]["id"] == plain["train"]["id"]
    assert {f["name"]: f["compression"] for f in summary["manifest"]["files"]}["Posts.xml"] == "gzip"


def test_html_page_saved_as_posts_xml_is_named(tmp_path, capsys):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "Posts.xml").write_text("<html><head><title>Login</title></head><body><p>x</p></body></html>")
    assert cli_main(["data", str(folder), "--no-token-limit", "--cache_dir", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert "root element is <html>, not <posts>" in err and str(folder / "Posts.xml") in err


FABRICATED = (
    '  <row Id="1000000001" PostTypeId="1" AcceptedAnswerId="1000000010" OwnerUserId="-1" Score="0"'
    ' CreationDate="2021-06-01T00:00:00" Title="Zorblat frimble quux wobble"'
    ' Body="&lt;p&gt;Fabricated text of the watermark question.&lt;/p&gt;" Tags="|ada|" />\n'
    '  <row Id="1000000010" PostTypeId="2" ParentId="1000000001" OwnerUserId="-1" Score="0"'
    ' CreationDate="2021-06-01T01:00:00"'
    ' Body="&lt;p&gt;Glorp snark vimble: nonsense text of the watermark answer.&lt;/p&gt;" />\n'
)


def test_fabricated_watermark_posts_are_dropped_and_counted(cardano_dir, tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    text = (cardano_dir / "Posts.xml").read_text()
    (folder / "Posts.xml").write_text(text.replace("</posts>", FABRICATED + "</posts>"))
    shutil.copy(cardano_dir / "PostLinks.xml", folder)
    data, summary = dataset(folder, tmp_path / "c")
    _, plain = dataset(cardano_dir, tmp_path / "d")
    assert summary["removed_fabricated"] == 2
    assert all(1000000001 not in data[split]["id"] for split in data)
    assert summary["kept"] == plain["kept"]
    # Community-owned posts with ordinary Ids (cardano has 32) are kept.
    assert plain["removed_fabricated"] == 0


TRAIN_DATES = {
    "train_start": "2021-01-01",
    "train_end": "2021-10-01",
    "validation_start": "2021-10-01",
    "validation_end": "2021-11-01",
    "test_start": "2021-11-01",
    "test_end": "2022-01-01",
}


def test_no_train_answer_from_after_the_training_period(cardano_dir, tmp_path):
    data, summary = dataset(cardano_dir, tmp_path / "a", **TRAIN_DATES)
    end = datetime.fromisoformat("2021-10-01T00:00:00+00:00")
    assert all(datetime.fromisoformat(moment) < end for moment in data["train"]["answer_created"])
    assert summary["removed_answer_after_split"] > 0
    late_gold = [m for m in data["validation"]["answer_created"] if m >= "2021-11-01"]
    assert late_gold, "validation gold answers may be of any date"
    old, old_summary = dataset(cardano_dir, tmp_path / "b", train_answers_before_end=False, **TRAIN_DATES)
    assert old_summary["removed_answer_after_split"] == 0
    assert len(old["train"]) == len(data["train"]) + summary["removed_answer_after_split"]
    assert old_summary["answer_rule"] == "question date"


def test_summary_prints_the_manifest_and_new_counts(cardano_dir, tmp_path, capsys):
    assert cli_main(["data", str(cardano_dir), "--no-token-limit", "--cache_dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "removed from train: answer after train end" in out and "dump file" in out
    values = json.loads(out.strip().splitlines()[-1])
    assert values["removed_fabricated"] == 0 and values["manifest"]["files"][1]["name"] == "Posts.xml"


def _password_7z(path: Path, source: Path) -> Path:
    with py7zr.SevenZipFile(path, "w", password="secret") as archive:
        archive.writeall(source, arcname="")
    return path


def _bad_archive(kind: str, cardano_dir: Path, tmp_path: Path) -> tuple[Path, str]:
    members = {name: cardano_dir / name for name in ("PostLinks.xml", "Posts.xml")}
    if kind == "truncated":
        good = make_7z(tmp_path / "whole.7z", members)
        path = tmp_path / "cut.7z"
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
        return path, "cannot read the 7z archive"
    if kind == "corrupt":
        path = tmp_path / "junk.7z"
        path.write_bytes(b"7z\xbc\xaf\x27\x1c" + os.urandom(4096))
        return path, "cannot read the 7z archive"
    if kind == "no posts":
        return make_7z(tmp_path / "tags.7z", {"Tags.xml": cardano_dir / "Tags.xml"}), "holds no Posts.xml"
    if kind == "password":
        return _password_7z(tmp_path / "locked.7z", cardano_dir), "password-protected"
    return make_7z(
        tmp_path / "two.7z", {f"{site}/{name}": path for site in ("a", "b") for name, path in members.items()}
    ), "holds 2 sites"


@pytest.mark.parametrize("kind", ["truncated", "corrupt", "no posts", "password", "several sites"])
def test_bad_archive_is_one_line_naming_it_and_writes_nothing(kind, cardano_dir, tmp_path, capsys):
    path, problem = _bad_archive(kind, cardano_dir, tmp_path)
    cache = tmp_path / "cache"
    assert cli_main(["data", str(path), "--no-token-limit", "--cache_dir", str(cache)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and problem in err[0], err
    assert not (cache / "datasets").exists() or not any((cache / "datasets").iterdir())


def _so_post(post_id: int, kind: int, owner: int, **extra: object) -> str:
    attributes = " ".join(f'{k}="{v}"' for k, v in extra.items())
    return (
        f'  <row Id="{post_id}" PostTypeId="{kind}" OwnerUserId="{owner}" Score="1" '
        f'CreationDate="2021-06-01T00:00:00" Body="&lt;p&gt;Body of {post_id}.&lt;/p&gt;" {attributes} />\n'
    )


def test_watermark_posts_are_found_in_stack_overflows_id_range_and_their_links_dropped(tmp_path):
    # Stack Overflow's real Ids reach ~8e7; the watermark question and answer sit at 1000000001 / 1000000010
    real_q, real_a, community_q = 78_000_001, 78_000_002, 78_000_003
    posts = [
        _so_post(real_q, 1, 7, Title="How to sort?", AcceptedAnswerId=real_a),
        _so_post(real_a, 2, 8, ParentId=real_q),
        _so_post(community_q, 1, -1, Title="A real Community wiki question"),
        _so_post(1_000_000_001, 1, -1, Title="Glorp", AcceptedAnswerId=1_000_000_010),
        _so_post(1_000_000_010, 2, -1, ParentId=1_000_000_001),
    ]
    site = tmp_path / "stackoverflow.com"
    site.mkdir()
    (site / "Posts.xml").write_text("<posts>\n" + "".join(posts) + "</posts>\n")
    links = [(1, real_q, 1_000_000_001, 3), (2, 1_000_000_001, real_q, 3), (3, real_q, community_q, 3)]
    (site / "PostLinks.xml").write_text(
        "<postlinks>\n"
        + "".join(
            f'  <row Id="{i}" CreationDate="2021-06-02T00:00:00" PostId="{p}" RelatedPostId="{r}" '
            f'LinkTypeId="{t}" />\n'
            for i, p, r, t in links
        )
        + "</postlinks>\n"
    )
    reader = DumpReader(site, tmp_path)
    questions = {q.id: q for q in reader.questions()}
    assert set(questions) == {real_q, community_q}  # the real Community post stays
    assert reader.counts["removed_fabricated"] == 2
    assert questions[real_q].duplicate_of == [community_q]  # the link to the watermark question is gone
    assert reader.counts["removed_fabricated_links"] == 2  # the two PostLinks rows of the watermark
    found = read_dump_links(site)
    assert set(found.grades) == {real_q, community_q} and 1_000_000_001 not in found.questions
    assert found.fabricated_links == 1  # one linked pair (a row each way)


def test_archive_reads_only_the_sites_own_postlinks(tmp_path):
    """A PostLinks.xml in another folder of the archive is never read (issue 34)."""
    from graphctx.data.links import read_dump_links

    def xml(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    row = '<row Id="{0}" PostId="{1}" RelatedPostId="{2}" LinkTypeId="3" />'
    own = xml("own.xml", f"<postlinks>{row.format(1, 1, 2)}</postlinks>")
    other = xml("other.xml", f"<postlinks>{row.format(1, 3, 4)}{row.format(2, 5, 6)}</postlinks>")
    posts = xml("posts.xml", '<posts><row Id="1" PostTypeId="1" Title="t" Body="b" /></posts>')
    archive = make_7z(
        tmp_path / "site.7z",
        {"other/PostLinks.xml": other, "site/Posts.xml": posts, "site/PostLinks.xml": own},
    )
    links = read_dump_links(archive)
    assert (links.rows, sorted(links.grades)) == (1, [1, 2])
