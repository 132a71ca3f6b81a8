"""Reading a specification from JSON or YAML text (validation is the model's job,
:class:`shared.desired_state.EnvironmentSpecification`)."""

from __future__ import annotations

from typing import Any, Literal

from shared.platform import safe_json
from shared.platform.errors import RuntimeCloudError


class SpecificationTextError(RuntimeCloudError, ValueError):
    """Specification text that cannot be read; the message says where, never quotes the text."""


def parse_specification_text(text: str, media_type: Literal["json", "yaml"] = "json") -> dict[str, Any]:
    """JSON or YAML text to a plain document (validation is the model's job)."""
    try:
        document = _yaml_document(text) if media_type == "yaml" else safe_json.loads(text)
    except safe_json.MalformedJson as error:
        raise SpecificationTextError(f"the specification is not valid {media_type}: {error}") from None
    if not isinstance(document, dict):
        raise SpecificationTextError("a specification is a mapping")
    return document


def _yaml_document(text: str) -> Any:
    import yaml

    try:
        document = yaml.load(text, Loader=_PlainYamlLoader)  # safe: a SafeLoader without aliases (below)
    except RecursionError:
        raise safe_json.MalformedJson(f"it nests deeper than {safe_json.MAX_DEPTH} levels") from None
    except yaml.MarkedYAMLError as error:  # its message quotes the text: only the position is kept
        mark = error.problem_mark or error.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise safe_json.MalformedJson(f"{error.problem or 'a syntax error'}{where}") from None
    except yaml.YAMLError:
        raise safe_json.MalformedJson("a syntax error") from None
    safe_json.check_depth(document)
    return document


def _plain_yaml_loader() -> type:
    import yaml

    class PlainYamlLoader(yaml.SafeLoader):
        """Safe YAML without anchors and aliases: a few lines of aliases can expand into gigabytes."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.get_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
                raise yaml.composer.ComposerError(None, None, "aliases are not allowed", event.start_mark)
            return super().compose_node(parent, index)

    return PlainYamlLoader


_PlainYamlLoader = _plain_yaml_loader()
