"""World models behind one protocol each: ``worlds.web`` and ``worlds.ledger``."""
