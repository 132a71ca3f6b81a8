"""Reading a policy layer's YAML (or JSON) text: safe YAML without aliases, depth-bounded.

The same rules as specifications (:mod:`shared.provisioning.specification_text`,
which this package may not import: it sits below provisioning): anchors and
aliases are refused (a few lines of them can expand into gigabytes), and the
error message gives the position, never the text.
"""

from __future__ import annotations

from typing import Any

import yaml

from shared.platform import safe_json
from shared.platform.errors import RuntimeCloudError


class YamlTextError(RuntimeCloudError, ValueError):
    """Text that is not readable YAML; the message says where."""


class _PlainYamlLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            raise yaml.composer.ComposerError(None, None, "aliases are not allowed", event.start_mark)
        return super().compose_node(parent, index)


def parse_yaml(text: str) -> Any:
    try:
        document = yaml.load(text, Loader=_PlainYamlLoader)  # safe: a SafeLoader without aliases
    except RecursionError:
        raise YamlTextError(f"it nests deeper than {safe_json.MAX_DEPTH} levels") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise YamlTextError(f"{error.problem or 'a syntax error'}{where}") from None
    except yaml.YAMLError:
        raise YamlTextError("a syntax error") from None
    safe_json.check_depth(document)
    return document
