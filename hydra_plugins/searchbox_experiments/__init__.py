"""Hydra search-path plugin: named experiments in experiments/experiment/*.yaml (`+experiment=NAME`)."""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

ROOT = Path(__file__).resolve().parents[2]


class SearchboxExperiments(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        # Only for searchbox's own app: other Hydra apps in the environment are left alone.
        if any(str(ROOT / "conf") in (element.path or "") for element in search_path.get_path()):
            search_path.append(provider="searchbox-experiments", path=f"file://{ROOT / 'experiments'}")
