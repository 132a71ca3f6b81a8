"""Values too large for a table property or a queue message, kept in a blob instead.

A table property holds 64 KiB and a queue message 64 KiB; orchestration inputs,
outputs and activity results can be larger. As the Azure Storage provider
does, such a value is written to ``<hub>-largemessages`` and the row or message
carries the blob's name. Purging an instance deletes its blobs.
"""

from __future__ import annotations

import uuid

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient

INLINE_LIMIT = 30_000  # characters; UTF-16 in tables, so 60 KB


class PayloadStore:
    def __init__(self, container: ContainerClient) -> None:
        self._container = container

    async def ensure(self) -> None:
        try:
            await self._container.create_container()
        except ResourceExistsError:
            pass

    @staticmethod
    def fits(text: str | None) -> bool:
        return text is None or len(text) <= INLINE_LIMIT

    async def put(self, instance_id: str, kind: str, text: str) -> str:
        name = f"{instance_id}/{kind}-{uuid.uuid4().hex}.json"
        await self._container.upload_blob(name, text.encode("utf-8"), overwrite=True)
        return name

    async def get(self, name: str) -> str:
        downloader = await self._container.download_blob(name)
        return (await downloader.readall()).decode("utf-8")

    async def delete_instance(self, instance_id: str) -> None:
        async for blob in self._container.list_blobs(name_starts_with=f"{instance_id}/"):
            try:
                await self._container.delete_blob(blob.name)
            except ResourceNotFoundError:
                pass
