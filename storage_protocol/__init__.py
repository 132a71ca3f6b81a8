"""What the app and the local host both speak to Azure Storage: one copy, imported by both.

The app never imports the local host and the local host never imports the app
(the import contracts in ``pyproject.toml``), yet both send table batches and
build storage clients the same way. That shared protocol lives here, in a
package that imports neither of them (a contract of its own), so there is one
copy to keep right: the lean table batch (:mod:`storage_protocol.table_batch`)
and the clients' transport options (:mod:`storage_protocol.client_options`).

It ships with the function app (a top-level package of the deployment zip),
is copied into the runner job's image beside ``shared/``, and the local host
imports it from the checkout.
"""
