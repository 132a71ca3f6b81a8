"""The factory's neighbours: ControlPlaneApi, KnowledgeHost and DeliveryHost, one small typed client each.

Each neighbour's calls are defined once here: its request and answer models
(pydantic), its named errors (:mod:`shared.platform.neighbours.errors`) and its client
(:mod:`.control_plane`, :mod:`.knowledge_host`, :mod:`.delivery_host`), all on
one HTTP helper (:mod:`.http_client`: time-outs, the host's bearer token,
retries only where safe, failures mapped to named errors). Each is pointed at
by a settings section (:mod:`.settings`, ``RuntimeCloud:<Neighbour>:BaseUrl``);
without a base URL the neighbour is not configured and the wiring hands out no
client. Health probes each one (:mod:`.probe`).

This package is a platform adapter: the feature modules, health and the wiring
import it; it imports none of them (pyproject.toml, the "layers" contract).
"""
