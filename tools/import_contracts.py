"""The project's own import-linter contract: features meet only through their ``api.py``.

import-linter's built-in ``protected`` contract guards a whole package; a feature
package must instead stay open at one module (its ``api``) and closed everywhere
else. ``make check`` runs this contract with the others (pyproject.toml,
``[tool.importlinter]``; DESIGN.md, "Features meet through their API").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import grimp
from importlinter import Contract, ContractCheck, fields, output


@dataclass(frozen=True, order=True)
class IllegalImport:
    importer: str
    imported: str
    line_numbers: tuple[int, ...]


class ApiOnlyContract(Contract):
    """Only a feature's own modules and the composition root import past the feature's ``api`` module.

    Options:
        - features: the feature packages (``shared.capacity``, ...).
        - api_module: the module name each feature exposes (``api``).
        - allowed_importers: packages that may reach inside any feature (the composition root).
    """

    type_name = "api_only"

    features = fields.ListField(subfield=fields.StringField())
    api_module = fields.StringField(default="api")
    allowed_importers = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        # import-linter's fields hold the parsed option values once the contract is built
        features = cast(list[str], self.features)
        allowed = cast(list[str], self.allowed_importers or [])
        illegal: list[IllegalImport] = []
        missing_api: list[str] = []
        for feature in features:
            api = f"{feature}.{self.api_module}"
            if api not in graph.modules:
                missing_api.append(feature)
            for imported in sorted({feature, *graph.find_descendants(feature)} - {api}):
                for importer in sorted(graph.find_modules_that_directly_import(imported)):
                    if _within(importer, [feature, *allowed]):
                        continue
                    details = graph.get_import_details(importer=importer, imported=imported)
                    lines = tuple(sorted(detail["line_number"] for detail in details))
                    illegal.append(IllegalImport(importer, imported, lines))
        return ContractCheck(
            kept=not illegal and not missing_api,
            warnings=[],
            metadata={"illegal": sorted(illegal), "missing_api": missing_api},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        for feature in check.metadata["missing_api"]:
            output.print_error(f"{feature} has no {self.api_module} module", bold=False)
            output.new_line()
        for link in check.metadata["illegal"]:
            lines = ", ".join(map(str, link.line_numbers))
            output.print_error(f"- {link.importer} -> {link.imported} (l.{lines})", bold=False)
            output.new_line()


def _within(module: str, packages: list[str]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)
