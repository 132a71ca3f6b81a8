"""The target's own record of changes: a canary message in each queue the chaos environments created.

No chaos specification ever removes a queue, so a queue created a second time (a step applied twice,
delete-and-create) shows as its canary gone. The canary is put in as soon as the queue shows up.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from azure.core.exceptions import AzureError
from azure.storage.queue import QueueServiceClient

from devhost.azurite import TARGET_ACCOUNT
from tools.chaos.cluster import Cluster
from tools.chaos.load import PREFIX

CANARY = "chaos-canary"


@dataclass
class Canaries:
    queues: set[str] = field(default_factory=set)

    def watch(self, cluster: Cluster, stop: threading.Event) -> None:
        while not stop.wait(2):
            self.place(cluster)

    def place(self, cluster: Cluster) -> None:
        service = QueueServiceClient.from_connection_string(cluster.connection_string(TARGET_ACCOUNT))
        try:
            for queue in service.list_queues(name_starts_with=PREFIX):
                if queue.name not in self.queues:
                    service.get_queue_client(queue.name).send_message(CANARY)
                    self.queues.add(queue.name)
        except AzureError:  # the store is down for a moment: the next round places what this one missed
            return

    def missing(self, cluster: Cluster) -> list[str]:
        """Queues whose canary is gone (created again after it was placed)."""
        service = QueueServiceClient.from_connection_string(cluster.connection_string(TARGET_ACCOUNT))
        gone = []
        for name in sorted(self.queues):
            try:
                messages = service.get_queue_client(name).peek_messages(max_messages=32)
            except AzureError:
                gone.append(name)
                continue
            if CANARY not in [message.content for message in messages]:
                gone.append(name)
        return gone
