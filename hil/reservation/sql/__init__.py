"""The SQL of the reservation store, one module per table and the schema, as
functions over a transaction (:class:`hil.reservation.sqltx.Tx`).

:class:`hil.reservation.sqlstore.SqlStore` calls them as ``leasesql.acquire``
and so on.  This package re-exports nothing, so its modules can import each
other through it without importing ``hil.reservation``'s ``__init__``, which
imports the store drivers that import them.
"""
