"""Connections to outside systems (spec §3.1, DESIGN §8) and the connectors that use them.

- types.py: the registry of connection types (ConnectionType) every other part reads;
- kinds/: one module per connector (imap.py, msft.py …), each registering its type — the
  registry imports them all (discovery: a new module there is a new type, nothing else to edit);
- interface.py: the Connections door (list, create, test, share, delete — as the signed-in user);
- store.py: what connectors and actions use at run time (credentials of a connection the user may
  use, renewed secrets, expiry), and which connection types a user has active.
"""
