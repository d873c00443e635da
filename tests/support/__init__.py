"""What the tests of every layer share (tests/conftest.py holds only the run's hooks):

- fixtures.py: the run's fixtures (databases, the apps over HTTP, the contract suites' containers), a plugin
  tests/conftest.py loads in every process that runs tests;
- apps.py: the apps the HTTP tests run (``Api``, ``Tenant``) and the pools that lend them, so that a run builds
  a Litestar app or an operator's container once and many tests use it, each with its own container, database,
  clock and tenants;
- databases.py: the run's migrated templates (built once per run, whichever process asks first) and private
  PostgreSQL databases copied from them;
- webhooks.py: the webhook delivery fixtures (a loopback receiver, a harness driving the worker one pass at a
  time), loaded with fixtures.py as a plugin;
- receiver.py: a real HTTP receiver on 127.0.0.1 that records requests and answers as scripted.
"""
