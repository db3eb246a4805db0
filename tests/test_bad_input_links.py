"""Bad input, round four: PostLinks.xml has one reader (:func:`graphctx.data.stackexchange.post_links`),
the dataset and retrieval-eval alike: the site's own file only, self-links and rows without ids ignored
and counted, in ``graphctx data``'s summary and in retrieval-eval's report (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from test_bad_input import settings_for
from test_data_archive import make_7z
from test_retrieval_eval import LINKS, TINY, small_config, write_site

from graphctx.cli import main
from graphctx.data.links import read_dump_links

ODD = [(70, 70, 3), (30, 30, 1)]
"""Self-links: one duplicate, one linked."""
NO_IDS = '  <row Id="99" PostId="x" RelatedPostId="40" LinkTypeId="3" />\n'


def odd_site(folder: Path) -> Path:
    site = write_site(folder, [*LINKS, *ODD])
    links = site / "PostLinks.xml"
    links.write_text(links.read_text().replace("</postlinks>", NO_IDS + "</postlinks>"))
    return site


def data_summary(source: Path, tmp_path: Path, capsys) -> tuple[dict, str]:
    config = small_config(tmp_path, source)  # the dates of settings_for: no split is empty
    assert main(["data", str(source), "--config", str(config), "--no-token-limit"]) == 0
    out = capsys.readouterr().out
    return json.loads(out.strip().splitlines()[-1]), out


def test_one_reader_counts_the_ignored_rows_for_the_dataset_and_the_link_queries(tmp_path, capsys):
    site = odd_site(tmp_path / "site")
    summary, table = data_summary(site, tmp_path, capsys)
    assert (summary["ignored_self_links"], summary["ignored_malformed_links"]) == (2, 1)
    assert "ignored: PostLinks.xml self-link" in table
    links = read_dump_links(site)
    assert dict(links.ignored) == {"ignored_self_links": 2, "ignored_malformed_links": 1}
    assert links.rows == len(LINKS)  # the odd rows are not counted as links
    assert 70 not in links.grades[70] and 30 not in links.grades[30]


def test_an_archive_counts_only_its_own_sites_rows(tmp_path, capsys):
    site, other = odd_site(tmp_path / "site"), write_site(tmp_path / "other", [(70, 70, 3)] * 5)
    members = {"site/Posts.xml": site / "Posts.xml", "site/PostLinks.xml": site / "PostLinks.xml"}
    archive = make_7z(tmp_path / "site.7z", {**members, "other/PostLinks.xml": other / "PostLinks.xml"})
    summary, _ = data_summary(archive, tmp_path, capsys)
    assert (summary["ignored_self_links"], summary["ignored_malformed_links"]) == (2, 1)
    assert read_dump_links(archive).ignored["ignored_self_links"] == 2


def test_retrieval_eval_reports_the_ignored_rows(tmp_path, capsys, tiny_bert):
    site = odd_site(tmp_path / "site")
    config = yaml.safe_load(TINY.read_text())
    config["cache_dir"] = str(tmp_path / "cache")
    split = dict(vars(settings_for(site).split))
    config["data"]["dataset"].update(source=str(site), workers=1, filters={"max_tokens": None}, split=split)
    config["retrieval"]["embedding_model"] = str(tiny_bert)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "report"
    argv = ["retrieval-eval", "--config", str(path), "--json", "--evaluation.retrieval_eval_dir", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    about = json.loads(captured.out)
    assert about["ignored_link_rows"] == {"ignored_self_links": 2, "ignored_malformed_links": 1}
    note = f"note: {site / 'PostLinks.xml'}: ignored 2 self-link rows, 1 rows without integer ids"
    assert note in captured.err
